"""bot/pipeline/replay.py: running again what an earlier process accepted but did not answer.

The functions on a real inbox (SQLite and Postgres) in front of a recording pipeline: what is
queued again, in which order, what expires or fails instead, and what a periodic sweep may take.
Then replay through a whole service: order, expiry, ``replay_max_age: 0``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select, update
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.pipeline.job import Job
from bot.pipeline.replay import ReplayReport, replay_pending, requeue, sweep
from bot.storage import Database
from bot.storage.inbox import InboxEntry, InboxState, SqlInbox
from bot.storage.models import InboxRow, utcnow
from channels import ChatRef, ChatType
from tests.bot.storage.test_inbox import (
    DM,
    KEY,
    entries,
    left_by_a_dead_process,
    message,
    settled,
    state_of,
)
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text

SLACK_DM = ChatRef("slack", "D1", ChatType.DIRECT)


class Pipeline:
    """The gateway as replay sees it: records what it is handed."""

    def __init__(self, channels: tuple[str, ...] = ("web",), *, accepting: bool = True) -> None:
        self.channels = channels
        self.accepting = accepting
        self.resubmitted: list[InboxEntry] = []

    def has_channel(self, name: str) -> bool:
        return name in self.channels

    def resubmit(self, entry: InboxEntry, *, replayed: bool = True, started: bool = False) -> Job:
        self.resubmitted.append(entry)
        return None  # type: ignore[return-value]  # replay ignores the job

    def submit(self, job: Job) -> None:
        raise AssertionError("replay submits nothing new")

    def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> list[Job]:
        raise AssertionError("replay drops nothing")

    def busy_sessions(self) -> set[str]:
        return set()

    def idle(self, session_key: str) -> bool:
        return True


async def left(inbox: SqlInbox, body: str, *, chat: ChatRef = DM) -> int:
    """An entry ``inbox``'s process accepted and never answered."""
    return await inbox.add(
        message(body, message_id=f"m-{body}", chat=chat), session_key=KEY, agent_id="main"
    )


async def backdate(db: Database, entry_id: int, seconds: float) -> None:
    statement = (
        update(InboxRow)
        .where(InboxRow.id == entry_id)
        .values(received_at=utcnow() - timedelta(seconds=seconds))
    )
    await db.run_write(lambda conn: conn.execute(statement))


async def ended(inbox: SqlInbox, entry_id: int) -> tuple[InboxState, str | None]:
    entry = await inbox.get(entry_id)
    assert entry is not None
    return entry.state, entry.reason


async def test_requeue_queues_fresh_entries_in_order(db: Database) -> None:
    inbox = SqlInbox(db, owner="me")
    first, second = await left(inbox, "first"), await left(inbox, "second")
    pipeline = Pipeline()
    report = await requeue(pipeline, inbox, await inbox.take_over(), max_age=3600)
    assert report == ReplayReport(replayed=2)
    assert [e.id for e in pipeline.resubmitted] == [first, second]
    assert (await ended(inbox, first))[0] is InboxState.QUEUED  # the pipeline runs it now


async def test_requeue_expires_old_entries_and_fails_those_of_a_gone_channel(
    db: Database,
) -> None:
    inbox = SqlInbox(db, owner="me")
    old = await left(inbox, "old")
    gone = await left(inbox, "gone", chat=SLACK_DM)
    fresh = await left(inbox, "fresh")
    await backdate(db, old, 7200)
    await backdate(db, fresh, 60)
    pipeline = Pipeline(("web",))
    with capture_logs() as logs:
        report = await requeue(pipeline, inbox, await inbox.take_over(), max_age=3600)
    assert report == ReplayReport(replayed=1, expired=1, failed=1)
    assert [e.id for e in pipeline.resubmitted] == [fresh]
    assert await ended(inbox, old) == (
        InboxState.EXPIRED,
        "older than bot.replay_max_age (3600 s)",
    )
    assert await ended(inbox, gone) == (InboxState.FAILED, "channel 'slack' is not enabled")
    assert {e["event"] for e in logs} >= {"inbox.expired", "inbox.channel_gone", "inbox.requeued"}


async def test_a_max_age_of_zero_never_expires(db: Database) -> None:
    inbox = SqlInbox(db, owner="me")
    ancient = await left(inbox, "ancient")
    await backdate(db, ancient, 30 * 86400)
    pipeline = Pipeline()
    report = await requeue(pipeline, inbox, await inbox.take_over(), max_age=0)
    assert report == ReplayReport(replayed=1)
    assert [e.id for e in pipeline.resubmitted] == [ancient]


async def test_replay_pending_takes_every_pending_entry_whoever_held_it(db: Database) -> None:
    alive = SqlInbox(db, owner="alive", lease_seconds=600)
    held = await left(alive, "held by a live lease")
    done = await left(alive, "done")
    await alive.finish(done, InboxState.ANSWERED)
    restarted = SqlInbox(db, owner="restarted")
    pipeline = Pipeline()
    with capture_logs() as logs:
        report = await replay_pending(pipeline, restarted, max_age=3600)
    assert report == ReplayReport(replayed=1)
    assert [e.id for e in pipeline.resubmitted] == [held]
    entry = await restarted.get(held)
    assert entry is not None and entry.owner == "restarted"
    assert [e for e in logs if e["event"] == "inbox.replay"] == [
        {"event": "inbox.replay", "replayed": 1, "expired": 0, "failed": 0, "log_level": "info"}
    ]


async def test_replay_of_nothing_says_nothing(db: Database) -> None:
    with capture_logs() as logs:
        report = await replay_pending(Pipeline(), SqlInbox(db), max_age=3600)
    assert report == ReplayReport()
    assert not [e for e in logs if e["event"] == "inbox.replay"]


async def test_a_sweep_renews_our_leases_and_takes_only_what_nobody_holds(db: Database) -> None:
    me = SqlInbox(db, owner="me", lease_seconds=600)
    other = SqlInbox(db, owner="other", lease_seconds=600)
    dead = SqlInbox(db, owner="dead", lease_seconds=-1)  # its lease is already over
    mine = await left(me, "mine")
    theirs = await left(other, "theirs")
    lapsed = await left(dead, "lapsed")
    released = await left(other, "released")
    await other.release(released, "retry")
    nearly_over = (  # our lease nearly over: the sweep must extend it
        update(InboxRow)
        .where(InboxRow.id == mine)
        .values(lease_until=utcnow() + timedelta(seconds=1))
    )
    await db.run_write(lambda conn: conn.execute(nearly_over))
    pipeline = Pipeline()
    report = await sweep(pipeline, me, max_age=3600)
    assert report == ReplayReport(replayed=2)
    assert [e.id for e in pipeline.resubmitted] == [lapsed, released]
    lease = await db.run_read(
        lambda conn: conn.scalar(select(InboxRow.lease_until).where(InboxRow.id == mine))
    )
    owner = await db.run_read(
        lambda conn: conn.scalar(select(InboxRow.owner).where(InboxRow.id == theirs))
    )
    assert lease is not None and lease > utcnow() + timedelta(seconds=500)
    assert owner == "other"


async def test_a_sweep_while_shutting_down_only_renews(db: Database) -> None:
    me = SqlInbox(db, owner="me", lease_seconds=600)
    dead = SqlInbox(db, owner="dead", lease_seconds=-1)
    lapsed = await left(dead, "lapsed")
    pipeline = Pipeline(accepting=False)
    assert await sweep(pipeline, me, max_age=3600) == ReplayReport()
    assert pipeline.resubmitted == []
    entry = await me.get(lapsed)
    assert entry is not None and entry.owner == "dead"  # left for the next process


# --- through a whole service ------------------------------------------------------------------


async def test_replay_keeps_order_and_goes_before_newer_messages(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm)
    await left_by_a_dead_process(config, "first", "second")
    llm.script(delay(0.3, text("answer 1")), text("answer 2"), text("answer 3"))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, DM)
        done = await dm.send("third")  # arrives while the replayed ones are still running
        assert done is not None
        await asyncio.wait_for(done, 10)
        asked = [r.messages[-1]["content"] for r in llm.chat_requests]
        assert asked == ["first", "second", "third"]
        assert dm.texts() == ["answer 1", "answer 2", "answer 3"]
        assert await entries(app) == []


async def test_old_messages_expire_instead_of_being_answered(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, bot={"replay_max_age": "1h"})
    old = utcnow() - timedelta(hours=2)
    [expired] = await left_by_a_dead_process(config, "stale", received_at=old)
    [fresh] = await left_by_a_dead_process(config, "fresh")
    llm.script(text("fresh answer"))
    with capture_logs() as logs:
        async with Loopgate(config) as app:
            dm = ChatDriver(app, DM)
            await dm.wait_for(lambda: dm.texts() == ["fresh answer"])
            await settled(app)
            entry = await state_of(app, expired)
            assert entry.state is InboxState.EXPIRED
            assert entry.reason == "older than bot.replay_max_age (3600 s)"
            assert (await state_of(app, fresh)).state is InboxState.ANSWERED
    assert [m["content"] for m in llm.chat_requests[0].messages if m["role"] == "user"] == ["fresh"]
    assert any(log["event"] == "inbox.expired" and log["entry"] == expired for log in logs)


async def test_replay_max_age_zero_never_expires(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, bot={"replay_max_age": 0})
    await left_by_a_dead_process(config, "ancient", received_at=utcnow() - timedelta(days=30))
    llm.script(text("better late"))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, DM)
        await dm.wait_for(lambda: dm.texts() == ["better late"])
