"""The dashboard's "Scheduled" page: every scheduled job, paused, resumed or removed here.

A change is a row update the running tickers see at their next pass (within a second); no
process has to be told.
"""

from __future__ import annotations

from typing import Any

from bot.app import Loopgate
from bot.storage.cron import SqlCronJobs
from bot.storage.inbox import SqlInbox


async def list_jobs(loopgate: Loopgate) -> list[dict[str, Any]]:
    jobs = SqlCronJobs(loopgate.db)
    inbox = SqlInbox(loopgate.db, owner="admin")
    found = []
    for job in await jobs.list():
        outcome = job.last_outcome or ""
        if job.last_entry is not None and (entry := await inbox.get(job.last_entry)) is not None:
            outcome += f": {entry.state.value}" + (f" ({entry.reason})" if entry.reason else "")
        found.append(
            {
                "id": job.id,
                "agent": job.agent_id,
                "chat": job.chat,
                "user": job.user_id,
                "source": job.source,
                "schedule": job.schedule.text,
                "message": job.message,
                "paused": job.paused,
                "next_run": job.schedule.describe(job.next_run_at) if job.active else "",
                "last_run": job.schedule.describe(job.last_run_at) if job.last_run_at else "",
                "last_outcome": outcome,
            }
        )
    return found


async def pause(loopgate: Loopgate, job_id: str, paused: bool) -> bool:
    return await SqlCronJobs(loopgate.db).set_paused(job_id, paused)


async def remove(loopgate: Loopgate, job_id: str) -> bool:
    return await SqlCronJobs(loopgate.db).remove(job_id)
