"""``loopgate cron``: the scheduled jobs (``list [--json]``), ``remove ID`` and ``run ID`` (now)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any, TextIO

from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database
from bot.storage.cron import SqlCronJobs, StoredCronJob
from bot.storage.inbox import SqlInbox
from bot.storage.models import utcnow


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cron = sub.add_parser("cron", parents=[common], help="scheduled jobs: list, remove, run now")
    cron_sub = cron.add_subparsers(dest="cron_command")
    listing = cron_sub.add_parser("list", parents=[common], help="every job (the default)")
    listing.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    remove = cron_sub.add_parser("remove", parents=[common], help="delete a job")
    remove.add_argument("id", help="the job id `loopgate cron list` shows")
    run = cron_sub.add_parser("run", parents=[common], help="run a job now (once)")
    run.add_argument("id", help="the job id `loopgate cron list` shows")


async def outcome(job: StoredCronJob, inbox: SqlInbox) -> str:
    """How the last occurrence went: the ticker's record, and its run's end when it had one."""
    if job.last_outcome is None:
        return ""
    if job.last_entry is None:
        return job.last_outcome
    entry = await inbox.get(job.last_entry)
    if entry is None:
        return job.last_outcome
    state = entry.state.value + (f" ({entry.reason})" if entry.reason else "")
    return f"{job.last_outcome}: {state}"


def job_json(job: StoredCronJob, last_outcome: str) -> dict[str, Any]:
    return {
        "id": job.id,
        "agent": job.agent_id,
        "chat": job.chat,
        "user": job.user_id,
        "source": job.source,
        "schedule": job.schedule.text,
        "timezone": job.schedule.timezone,
        "message": job.message,
        "paused": job.paused,
        "next_run": _iso(job.next_run_at),
        "last_run": _iso(job.last_run_at),
        "last_outcome": last_outcome or None,
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


async def run(config: Config, args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # looked up now: a test may have replaced it

    async def act(db: Database) -> int:
        jobs = SqlCronJobs(db)
        command = args.cron_command or "list"
        if command == "remove":
            if not await jobs.remove(args.id):
                print(f"loopgate: no scheduled job {args.id}", file=sys.stderr)
                return 1
            print(f"job {args.id} removed", file=out)
            return 0
        if command == "run":
            job = await jobs.get(args.id)
            if job is not None and job.paused:
                # The ticker skips paused jobs: "due now" would silently never run.
                print(
                    f"loopgate: job {args.id} is paused; resume it (dashboard: Scheduled) first",
                    file=sys.stderr,
                )
                return 1
            if not await jobs.set_next(args.id, utcnow()):
                print(f"loopgate: no scheduled job {args.id}", file=sys.stderr)
                return 1
            print(
                f"job {args.id} is due now: a running `loopgate serve` runs it within seconds, "
                "otherwise the next one to start does",
                file=out,
            )
            return 0
        inbox = SqlInbox(db, owner="cli")
        rows = [job_json(job, await outcome(job, inbox)) for job in await jobs.list()]
        if getattr(args, "json", False):
            print(json.dumps(rows, ensure_ascii=False, indent=2), file=out)
        else:
            _table(rows, out)
        return 0

    return await with_database(config, act)


def _table(rows: list[dict[str, Any]], out: TextIO) -> None:
    if not rows:
        print("cron: no scheduled jobs", file=out)
        return
    columns = ("ID", "AGENT", "CHAT", "SCHEDULE", "NEXT RUN", "LAST RUN", "OUTCOME")
    cells = [
        (
            row["id"],
            row["agent"],
            row["chat"],
            row["schedule"] + (" (paused)" if row["paused"] else ""),
            _short(row["next_run"]),
            _short(row["last_run"]),
            row["last_outcome"] or "",
        )
        for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    for line in (columns, *cells):
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip(), file=out)


def _short(at: str | None) -> str:
    """UTC to the second: ``2026-12-05 09:00:00Z``; ``-`` for none."""
    return "-" if at is None else at[:19].replace("T", " ") + "Z"
