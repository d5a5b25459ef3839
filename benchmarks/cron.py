"""Scheduled jobs under load: N jobs due in the same minute, from due time to delivered answer.

Each job belongs to a chat of its own on the local (web) channel; the model answers instantly
in-process (echo), so what is measured is Loopgate's own path: the ticker's pass (due query,
one inbox insert under the occurrence's key, one advance per job), the scheduler, the turn,
the delivery and the inbox's records.

    python benchmarks/cron.py [--jobs 1000] [--spread 60] [--lead 3] [--database URL]

``--spread`` seconds: the due times are spread evenly over that window (0: all at the same
instant, the worst case). Prints the delay from each job's due time to its answer (p50, p90,
p99, max; the ticker's 1 s period is part of it), the CPU time the process used from the
first due time until the last answer (total and per job), and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, update

from agent_core import parse_schedule
from agent_core.testing import ScriptedProvider
from bot.app import Loopgate
from bot.config import Config, parse_config
from bot.logging_setup import configure_logging
from bot.pipeline.session_keys import session_key
from bot.storage.cron import SqlCronJobs
from bot.storage.models import CronJobRow
from channels import ChatRef, ChatType, InboundMessage, Sender
from channels.local import Outbound


def bench_config(workdir: Path, database: str | None) -> Config:
    return parse_config(
        {
            "database": {"url": database or f"sqlite+aiosqlite:///{workdir / 'bench.db'}"},
            "agents": {"defaults": {"workspace": str(workdir / "ws")}},
            "bot": {"reactions": False, "sender_rate_limit": "off"},
        },
        {},
    )


async def bench(jobs: int, spread: float, lead: float, workdir: Path, database: str | None) -> None:
    config = bench_config(workdir, database)
    async with Loopgate(config, providers={"openai": ScriptedProvider()}) as app:
        store = SqlCronJobs(app.db)
        ids: list[str] = []
        due: dict[str, datetime] = {}
        delivered: dict[str, float] = {}
        finished = asyncio.Event()

        async def on_message(o: Outbound) -> None:
            if o.kind == "message" and o.chat.chat_id not in delivered:
                delivered[o.chat.chat_id] = time.time()
                if len(delivered) == jobs:
                    finished.set()

        origins = []
        for n in range(jobs):
            chat = ChatRef("web", f"cron{n}", ChatType.DIRECT)
            app.web.listen(chat.chat_id, on_message)
            origins.append(
                InboundMessage(
                    chat=chat, message_id=f"m{n}", sender=Sender(f"u{n}"), text="schedule it"
                )
            )
        # The jobs go in paused (one transaction each, as the tool adds them), then are
        # resumed at once: the time spent adding them is not counted as lateness.
        schedule = parse_schedule("in 1h", "UTC", datetime.now(UTC), min_interval=60)
        for n, origin in enumerate(origins):
            job = await store.add(
                agent_id="main",
                session_key=session_key("main", origin.chat),
                origin=origin,
                schedule=schedule,
                message=f"reminder {n}",
                next_run_at=None,
            )
            ids.append(job.id)
        first_due = datetime.now(UTC) + timedelta(seconds=lead)
        times = {
            job_id: first_due + timedelta(seconds=spread * n / max(1, jobs))
            for n, job_id in enumerate(ids)
        }
        for job_id, origin in zip(ids, origins, strict=True):
            due[origin.chat.chat_id] = times[job_id]

        def schedule_all(conn: Connection) -> None:
            for job_id, at in times.items():
                conn.execute(
                    update(CronJobRow).where(CronJobRow.id == job_id).values(next_run_at=at)
                )

        await app.db.run_write(schedule_all)
        # Waits for the first due time: the benchmark measures from there.
        await asyncio.sleep(max(0.0, (first_due - datetime.now(UTC)).total_seconds()))
        cpu0, wall0 = time.process_time(), time.time()
        await asyncio.wait_for(finished.wait(), timeout=max(120.0, spread * 3))
        cpu, wall = time.process_time() - cpu0, time.time() - wall0

    delays = sorted((delivered[c] - due[c].timestamp()) * 1000 for c in due)
    q = statistics.quantiles(delays, n=100)
    result = {
        "jobs": jobs,
        "spread_s": spread,
        "database": "postgres" if database and "postgres" in database else "sqlite",
        "delay_ms": {
            "p50": round(q[49], 1),
            "p90": round(q[89], 1),
            "p99": round(q[98], 1),
            "max": round(delays[-1], 1),
        },
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_job": round(cpu * 1000 / jobs, 2),
        "wall_s": round(wall, 2),
    }
    print(f"{jobs} jobs due over {spread:g} s ({result['database']}), echo model in-process")
    d = result["delay_ms"]
    print(
        f"delay from due time to delivered answer: p50 {d['p50']} ms, p90 {d['p90']} ms, "
        f"p99 {d['p99']} ms, max {d['max']} ms"
    )
    print(
        f"CPU from the first due time to the last answer: {result['cpu_s']} s "
        f"({result['cpu_ms_per_job']} ms per job) over {result['wall_s']} s"
    )
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=60.0)
    parser.add_argument("--lead", type=float, default=3.0)
    parser.add_argument("--database", default=None, help="default: a temporary SQLite file")
    args = parser.parse_args()
    configure_logging("error")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.jobs, args.spread, args.lead, Path(tmp), args.database))


if __name__ == "__main__":
    main()
