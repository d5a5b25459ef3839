"""The ``cron`` tool's jobs bound to the calling run's chat, in the real table."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core import RunRequest, parse_schedule
from agent_core.tools import CronRefused, ToolContext
from bot.scheduling.jobs import ChatCronJobs
from bot.storage import Database
from bot.storage.cron import SqlCronJobs
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 4, 23, 0, tzinfo=UTC)
SCHEDULE = parse_schedule("in 1h", "UTC", NOW, min_interval=60)


def context(
    user: str = "1", chat: str = "100", *, origin: bool = True, depth: int = 0
) -> ToolContext:
    msg = InboundMessage(
        chat=ChatRef("telegram", chat, ChatType.DIRECT),
        message_id="9",
        sender=Sender(user, "Ann"),
        text="remind me",
        received_at=NOW,
    )
    key = f"agent:main:telegram:direct:{chat}"
    request = RunRequest(
        session_key=key,
        message="remind me",
        user_id=f"telegram:{user}",
        depth=depth,
        origin=msg if origin else None,
    )
    return ToolContext(
        workspace=Path("."),
        session_key=key,
        user_id=f"telegram:{user}",
        agent_id="main",
        run_id="r",
        request=request,
    )


async def test_jobs_belong_to_the_user_and_chat_of_the_run(db: Database) -> None:  # noqa: F811
    jobs = ChatCronJobs(SqlCronJobs(db))
    job_id = await jobs.add(context(), SCHEDULE, "tea", NOW)
    await jobs.add(context(chat="200"), SCHEDULE, "elsewhere", NOW)
    stored = await jobs.store.get(job_id)
    assert stored is not None
    assert (stored.chat, stored.user_id, stored.session_key) == (
        "telegram:100",
        "telegram:1",
        "agent:main:telegram:direct:100",
    )
    assert stored.origin.message_id == "9"
    assert [job.message for job in await jobs.list(context())] == ["tea"]
    assert await jobs.count(context()) == 2  # every chat of the user
    assert await jobs.list(context(user="2")) == []
    assert not await jobs.remove(context(user="2"), job_id)
    assert not await jobs.remove(context(chat="200"), job_id)
    assert await jobs.remove(context(), job_id)


async def test_runs_without_a_chat_or_child_runs_are_refused(db: Database) -> None:  # noqa: F811
    jobs = ChatCronJobs(SqlCronJobs(db))
    with pytest.raises(CronRefused, match="no chat to come back to"):
        await jobs.add(context(origin=False), SCHEDULE, "x", NOW)
    with pytest.raises(CronRefused, match="only the agent talking with the user"):
        await jobs.add(context(depth=1), SCHEDULE, "x", NOW)
    assert await jobs.store.list() == []
