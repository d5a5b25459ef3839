"""The ``cron`` tool against a plain in-memory :class:`CronJobs`: what the model gets back for
add, list and remove, and a tool error it can act on for every bad call."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ToolError
from agent_core.schedules import Schedule
from agent_core.tools import CronJob, CronPolicy, CronRefused, ToolContext, ToolKind, cron_tool

NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)


class MemoryJobs:
    """Jobs by (user, chat); the chat is the session key here."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[str, str, CronJob]] = {}
        self.refuse = False

    async def add(
        self, ctx: ToolContext, schedule: Schedule, message: str, next_run_at: datetime
    ) -> str:
        if self.refuse:
            raise CronRefused("this run has no chat to come back to")
        job_id = f"job{len(self.jobs) + 1}"
        job = CronJob(job_id, schedule, message, next_run_at)
        self.jobs[job_id] = (ctx.user_id, ctx.session_key, job)
        return job_id

    async def count(self, ctx: ToolContext) -> int:
        return sum(1 for user, _, _ in self.jobs.values() if user == ctx.user_id)

    async def list(self, ctx: ToolContext) -> list[CronJob]:
        return [
            job
            for user, chat, job in self.jobs.values()
            if (user, chat) == (ctx.user_id, ctx.session_key)
        ]

    async def remove(self, ctx: ToolContext, job_id: str) -> bool:
        found = self.jobs.get(job_id)
        if found is None or found[:2] != (ctx.user_id, ctx.session_key):
            return False
        del self.jobs[job_id]
        return True


def ctx(user: str = "telegram:1", chat: str = "chat-a") -> ToolContext:
    return ToolContext(
        workspace=Path("."), session_key=chat, user_id=user, agent_id="main", run_id="r"
    )


@pytest.fixture
def jobs() -> MemoryJobs:
    return MemoryJobs()


async def call(
    jobs: MemoryJobs, args: dict[str, Any], context: ToolContext | None = None, **policy: Any
) -> str:
    tool = cron_tool(jobs, CronPolicy(**policy), clock=lambda: NOW)
    return await tool.handler(args, context or ctx())


async def test_add_returns_the_id_and_next_run_in_the_users_zone(jobs: MemoryJobs) -> None:
    reply = await call(
        jobs,
        {"action": "add", "schedule": "at 2026-12-05T09:00", "message": "Call Anna"},
        timezone="Europe/Berlin",
    )
    assert reply == (
        "Scheduled job job1 (once, at 2026-12-05T09:00); next run: "
        "Sat 2026-12-05 09:00 Europe/Berlin."
    )
    [(_, _, job)] = jobs.jobs.values()
    assert job.message == "Call Anna"
    assert job.next_run_at == datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


async def test_a_repeating_job_says_so(jobs: MemoryJobs) -> None:
    reply = await call(
        jobs, {"action": "add", "schedule": "0 8 * * 1", "message": "Send the open invoices"}
    )
    assert reply == (
        "Scheduled job job1 (repeating, 0 8 * * 1); next run: Mon 2026-12-07 08:00 UTC."
    )


async def test_list_shows_this_users_jobs_in_this_chat(jobs: MemoryJobs) -> None:
    await call(jobs, {"action": "add", "schedule": "in 10m", "message": "tea"})
    await call(jobs, {"action": "add", "schedule": "every 1h", "message": "stretch"})
    await call(
        jobs, {"action": "add", "schedule": "in 1d", "message": "other chat"}, ctx(chat="chat-b")
    )
    await call(
        jobs,
        {"action": "add", "schedule": "in 1d", "message": "other user"},
        ctx(user="telegram:2"),
    )
    reply = await call(jobs, {"action": "list"})
    assert reply.splitlines() == [
        "2 scheduled job(s):",
        "- job1: in 10m; next run: Fri 2026-12-04 23:10 UTC; message: tea",
        "- job2: every 1h; next run: Sat 2026-12-05 00:00 UTC; message: stretch",
    ]
    assert await call(jobs, {"action": "list"}, ctx(user="telegram:9")) == (
        "No scheduled jobs in this chat."
    )


async def test_remove_takes_only_the_callers_job(jobs: MemoryJobs) -> None:
    await call(jobs, {"action": "add", "schedule": "in 10m", "message": "tea"})
    with pytest.raises(ToolError, match="no job 'job1' of yours in this chat"):
        await call(jobs, {"action": "remove", "id": "job1"}, ctx(user="telegram:2"))
    assert await call(jobs, {"action": "remove", "id": " job1 "}) == "Removed job job1."
    assert jobs.jobs == {}


async def test_more_than_max_jobs_per_user_is_refused(jobs: MemoryJobs) -> None:
    for n in range(3):
        await call(
            jobs,
            {"action": "add", "schedule": f"in {n + 1}h", "message": "x"},
            ctx(chat=f"chat-{n}"),
            max_jobs_per_user=3,
        )
    with pytest.raises(ToolError, match="already have 3 scheduled jobs") as info:
        await call(
            jobs, {"action": "add", "schedule": "in 5h", "message": "x"}, max_jobs_per_user=3
        )
    assert "remove one first" in str(info.value)
    assert len(jobs.jobs) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'action' must be one of"),
        ({"action": "pause"}, "'action' must be one of"),
        ({"action": "add", "message": "x"}, "needs a 'schedule'"),
        ({"action": "add", "schedule": "in 1h"}, "needs a 'message'"),
        ({"action": "add", "schedule": "in 1h", "message": "  "}, "needs a 'message'"),
        ({"action": "add", "schedule": "in 1h", "message": "x" * 4001}, "longer than 4000"),
        ({"action": "add", "schedule": "soon", "message": "x"}, "unknown schedule 'soon'"),
        ({"action": "add", "schedule": "at 2026-12-01T09:00", "message": "x"}, "in the past"),
        ({"action": "add", "schedule": "every 10s", "message": "x"}, "more often than allowed"),
        ({"action": "add", "schedule": "*/1 * * * *", "message": "x"}, None),
        ({"action": "remove"}, "needs the job's 'id'"),
        ({"action": "remove", "id": "nope"}, "no job 'nope'"),
    ],
)
async def test_bad_calls_are_tool_errors(
    jobs: MemoryJobs, args: dict[str, Any], message: str | None
) -> None:
    if message is None:
        assert (await call(jobs, args)).startswith("Scheduled job job1 (repeating")
        return
    with pytest.raises(ToolError, match=message):
        await call(jobs, args)
    assert jobs.jobs == {}


async def test_min_interval_comes_from_the_policy(jobs: MemoryJobs) -> None:
    args = {"action": "add", "schedule": "every 30m", "message": "x"}
    with pytest.raises(ToolError, match="at most every 1h"):
        await call(jobs, args, min_interval=3600)
    assert "repeating" in await call(jobs, args, min_interval=60)


async def test_a_run_without_a_chat_is_refused(jobs: MemoryJobs) -> None:
    jobs.refuse = True
    with pytest.raises(ToolError, match="no chat to come back to"):
        await call(jobs, {"action": "add", "schedule": "in 1h", "message": "x"})


def test_it_is_an_async_tool() -> None:
    tool = cron_tool(MemoryJobs(), CronPolicy())
    assert tool.name == "cron" and tool.kind is ToolKind.ASYNC
    assert tool.parameters["properties"]["action"]["enum"] == ["add", "list", "remove"]
