"""Three ``loopgate serve`` OS processes (one Postgres schema, one Redis prefix) fire every
occurrence of every scheduled job exactly once, and a run killed with its process is taken
over by another one. Harness: :mod:`tests.cluster_processes`.

Every process runs a ticker over the same jobs; the occurrences meet on the inbox's dedupe key
(job id, scheduled time), so one process stores each and the others find it taken.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_core import parse_schedule
from bot.storage.cron import SqlCronJobs
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.cluster_processes import ClusterLLM, ServeCluster, dm_session, texts, until
from tests.cluster_support import REDIS_URL, needs_postgres, needs_redis
from tests.fakes.llm_server import delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.storage_support import PG_URL

pytestmark = [needs_redis, needs_postgres]

ONE_OFFS = 150  # enough that one pass takes long and the tickers of the three overlap
FIRST_CHAT = 9000
BEAT_CHAT = 9900


@asynccontextmanager
async def cluster(workdir: Path) -> AsyncIterator[tuple[ServeCluster, FakeTelegram, ClusterLLM]]:
    async with ClusterLLM() as llm, FakeTelegram() as tg:
        serve = ServeCluster(
            workdir,
            llm=llm,
            tg=tg,
            redis_url=REDIS_URL,
            key_prefix=f"lgcron-{uuid.uuid4().hex[:10]}",
            schema=f"test_{uuid.uuid4().hex[:16]}",
            postgres_url=PG_URL,
            lease_seconds=2.0,
            sections={"cron": {"min_interval": "1s"}},
        )
        try:
            await serve.start()
            yield serve, tg, llm
        finally:
            await serve.aclose()


async def add_job(jobs: SqlCronJobs, chat: int, schedule: str, message: str, at: datetime) -> str:
    origin = InboundMessage(
        chat=ChatRef("telegram", str(chat), ChatType.DIRECT),
        message_id="1",
        sender=Sender(str(chat), "User"),
        text="schedule it",
        received_at=at,
    )
    parsed = parse_schedule(schedule, "UTC", at, min_interval=1)
    job = await jobs.add(
        agent_id="main",
        session_key=dm_session(chat),
        origin=origin,
        schedule=parsed,
        message=message,
        next_run_at=at,
    )
    return job.id


def fired_lines(serve: ServeCluster) -> list[str]:
    lines: list[str] = []
    for process in serve:
        log = process.log_path.read_text(errors="replace")
        lines += [line for line in log.splitlines() if "cron.fired" in line]
    return lines


async def test_three_processes_fire_each_occurrence_once(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (serve, tg, llm):
        jobs = SqlCronJobs(serve.db)
        due = datetime.now(UTC) + timedelta(seconds=2)
        one_offs = [
            await add_job(jobs, FIRST_CHAT + n, "in 1m", f"reminder {n}", due)
            for n in range(ONE_OFFS)
        ]
        beat = await add_job(jobs, BEAT_CHAT, "every 1s", "beat", due)
        chats = [FIRST_CHAT + n for n in range(ONE_OFFS)]

        await until(
            lambda: all(texts(tg, c) for c in chats) and len(texts(tg, BEAT_CHAT)) >= 4,
            lambda: f"{[texts(tg, c) for c in chats]}\n{serve.logs()}",
            timeout=90,
        )
        await jobs.remove(beat)

        async def settled() -> bool:
            return not await serve.pending()

        await until(settled, serve.logs, timeout=60, interval=0.1)
        rows = await serve.inbox()
        beat_entries = [r for r in rows if r["session_key"] == dm_session(BEAT_CHAT)]
        fired = fired_lines(serve)

    for n, chat in enumerate(chats):
        assert texts(tg, chat) == [f"echo: reminder {n}"], chat
    # Every beat that was stored was delivered once, and nothing else was.
    assert texts(tg, BEAT_CHAT) == ["echo: beat"] * len(beat_entries)
    assert {r["state"] for r in rows} == {"answered"}
    # One "fired" per occurrence over the three logs: no process fired one a peer had.
    assert len(fired) == ONE_OFFS + len(beat_entries)
    fired_jobs = [re.search(r"job=(\w+)", line) for line in fired]
    assert sorted(m.group(1) for m in fired_jobs if m and m.group(1) != beat) == sorted(one_offs)
    assert llm.asked("reminder") == ONE_OFFS


@pytest.mark.parametrize("chat", [9950])
async def test_a_job_run_killed_with_its_process_is_answered_by_another(
    tmp_path: Path, chat: int
) -> None:
    async with cluster(tmp_path) as (serve, tg, llm):
        llm.when("slow reminder", delay(60, text("never sent")))
        llm.when("slow reminder", text("Time to call Anna!"))
        jobs = SqlCronJobs(serve.db)
        await add_job(jobs, chat, "in 1m", "slow reminder", datetime.now(UTC))
        await until(lambda: llm.asked("slow reminder") == 1, serve.logs, timeout=20)
        holder = await serve.holder_of(dm_session(chat))
        await holder.kill()
        # Another process takes the entry over once the dead one's lease runs out.
        await until(lambda: texts(tg, chat), serve.logs, timeout=30)

        async def settled() -> bool:
            return not await serve.pending()

        await until(settled, serve.logs, timeout=30, interval=0.1)

    assert texts(tg, chat) == ["Time to call Anna!"]
    assert llm.asked("slow reminder") == 2
