"""The durable inbox: the table on both backends, the pipeline's records, resuming a
half-delivered answer, and graceful drain
(``loopgate inbox`` is in tests/bot/cli/test_inbox.py). Replay at start-up and its expiry
are tested in tests/bot/pipeline/test_replay.py.

The platform-level restarts (SIGTERM/SIGKILL of ``loopgate serve`` against the fake Telegram,
Slack and Zalo servers) are in ``tests/e2e/test_restart.py``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, update
from sqlalchemy import text as sql
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.config import Config
from bot.pipeline.chunking import render_chunks
from bot.storage import Database, SqlDedupeStore, open_database
from bot.storage import inbox as inbox_module
from bot.storage.inbox import InboxEntry, InboxState, SqlInbox
from bot.storage.models import InboxRow, utcnow
from channels import ChatRef, ChatType, InboundMessage, NotAccepted, Sender
from channels.local import Outbound
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.service_support import until
from tests.waiting import wait_until

DM = ChatRef("web", "dm-alice", ChatType.DIRECT)
KEY = "agent:main:web:direct:dm-alice"


def message(body: str, *, message_id: str = "m1", chat: ChatRef = DM) -> InboundMessage:
    return InboundMessage(
        chat=chat, message_id=message_id, sender=Sender("alice", "Alice"), text=body
    )


async def entries(app: Loopgate) -> list[InboxEntry]:
    assert app.inbox is not None
    return sorted(await app.inbox.unanswered(limit=1000), key=lambda e: e.id)


async def settled(app: Loopgate, timeout: float = 10) -> None:
    """Until nothing is queued or running: a reply is visible a moment before it is recorded."""
    inbox = app.inbox
    assert inbox is not None

    async def idle() -> bool:
        return not sum((await inbox.counts()).values())

    await wait_until(idle, timeout)


async def state_of(app: Loopgate, entry_id: int) -> InboxEntry:
    assert app.inbox is not None
    entry = await app.inbox.get(entry_id)
    assert entry is not None
    return entry


async def left_by_a_dead_process(config: Config, *bodies: str, **changes: object) -> list[int]:
    """Entries a previous process accepted and never finished, as SIGKILL leaves them."""
    async with await open_database(config.database.url) as db:
        inbox = SqlInbox(db, owner="dead-host:1234:abcd")
        ids = []
        for index, body in enumerate(bodies):
            entry_id = await inbox.add(
                message(body, message_id=f"old-{index}"), session_key=KEY, agent_id="main"
            )
            await inbox.start(entry_id)
            ids.append(entry_id)
        if changes:
            statement = update(InboxRow).where(InboxRow.id.in_(ids)).values(**changes)
            await db.run_write(lambda conn: conn.execute(statement))
        return ids


# --- the table, on SQLite and Postgres ----------------------------------------------------


async def test_an_entry_moves_queued_running_answered(db: Database) -> None:
    inbox = SqlInbox(db, owner="p1")
    msg = message("hi\x00 there")
    msg.metadata["event_id"] = "Ev1"
    entry_id = await inbox.add(msg, session_key=KEY, agent_id="main")
    entry = await inbox.get(entry_id)
    assert entry is not None
    assert (entry.state, entry.owner, entry.attempts) == (InboxState.QUEUED, "p1", 0)
    # The normalized content is stored, so a replay needs nothing from the platform.
    assert entry.message.text == "hi\ufffd there"
    assert entry.message.chat == DM and entry.message.sender == msg.sender
    assert entry.message.metadata == {"event_id": "Ev1"}
    assert entry.message.received_at == msg.received_at
    assert await inbox.counts() == {"queued": 1, "running": 0}

    await inbox.start(entry_id)
    await inbox.save_answer(entry_id, "the answer")
    await inbox.add_part(entry_id, ["101"], last=False)
    entry = await inbox.get(entry_id)
    assert entry is not None
    assert (entry.state, entry.attempts, entry.answer, entry.parts) == (
        InboxState.RUNNING,
        1,
        "the answer",
        ["101"],
    )
    assert await inbox.counts() == {"queued": 0, "running": 1}
    await inbox.add_part(entry_id, ["101", "102"], last=True)
    entry = await inbox.get(entry_id)
    assert entry is not None and entry.state is InboxState.ANSWERED and entry.owner is None
    assert await inbox.counts() == {"queued": 0, "running": 0}
    assert await inbox.unanswered() == []


async def test_the_backlog_is_the_pending_counts_and_the_oldest_pending_entry(
    db: Database,
) -> None:
    inbox = SqlInbox(db, owner="p1")
    assert await inbox.backlog() == ({"queued": 0, "running": 0}, None)
    ids = [
        await inbox.add(message(b, message_id=b), session_key=KEY, agent_id="main") for b in "abc"
    ]
    now = utcnow()

    def stored_earlier(conn: Connection) -> None:
        for minutes, entry_id in zip((30, 20, 10), ids, strict=True):
            conn.execute(
                update(InboxRow)
                .where(InboxRow.id == entry_id)
                .values(created_at=now - timedelta(minutes=minutes))
            )

    await db.run_write(stored_earlier)
    await inbox.start(ids[1])
    await inbox.finish(ids[0], InboxState.ANSWERED)  # ended: no longer in the backlog
    counts, oldest = await inbox.backlog()
    assert counts == {"queued": 1, "running": 1}
    assert oldest == now - timedelta(minutes=20)


async def test_preview_ids_are_kept_for_the_replay_until_cleared(db: Database) -> None:
    inbox = SqlInbox(db, owner="p1")
    entry_id = await inbox.add(message("hi"), session_key=KEY, agent_id="main", running=True)
    assert await inbox.set_previews(entry_id, ["1700.1"])
    assert await inbox.set_previews(entry_id, ["1700.1", "1700.2"])  # the list replaces
    (taken,) = await SqlInbox(db, owner="next").take_over()  # the process died
    assert taken.previews == ["1700.1", "1700.2"]
    assert not await inbox.set_previews(entry_id, [])  # the dead one holds it no more
    assert await SqlInbox(db, owner="next").set_previews(entry_id, [])
    entry = await inbox.get(entry_id)
    assert entry is not None and entry.previews == []


async def test_take_over_respects_live_leases_of_others(db: Database) -> None:
    alive = SqlInbox(db, owner="alive", lease_seconds=60)
    dead = SqlInbox(db, owner="dead", lease_seconds=-1)  # its lease is already over
    held = await alive.add(message("a", message_id="1"), session_key=KEY, agent_id="main")
    lapsed = await dead.add(message("b", message_id="2"), session_key=KEY, agent_id="main")
    released = await alive.add(message("c", message_id="3"), session_key=KEY, agent_id="main")
    await alive.release(released, "interrupted by shutdown")
    done = await alive.add(message("d", message_id="4"), session_key=KEY, agent_id="main")
    await alive.finish(done, InboxState.FAILED, "run: boom")

    newcomer = SqlInbox(db, owner="new")
    # A sweep takes what nobody holds; a process's own live entries are never taken again.
    assert [e.id for e in await newcomer.take_over(all_owners=False)] == [lapsed, released]
    assert await alive.take_over(all_owners=False) == []
    # At start-up the single process takes every pending entry, oldest first.
    taken = await SqlInbox(db, owner="restarted").take_over()
    assert [e.id for e in taken] == [held, lapsed, released]
    entry = await newcomer.get(held)
    assert entry is not None and entry.owner == "restarted"


async def test_claims_go_session_by_session_and_a_lapsed_holder_lets_go(db: Database) -> None:
    """Several processes: an entry stored unowned is claimed with its session, oldest first;
    a process whose lease ran out can no longer start, save, deliver or end what a peer took."""
    slow = SqlInbox(db, owner="slow", lease_seconds=-1)  # stalled past its lease
    peer = SqlInbox(db, owner="peer")
    other_key = KEY + ":other"
    first = await slow.add(message("a", message_id="1"), session_key=KEY, agent_id="main")
    await slow.start(first)
    second = await peer.accept(
        message("b", message_id="2"),
        dedupe_key="k2",
        session_key=KEY,
        agent_id="main",
        owned=False,
    )
    third = await peer.accept(
        message("c", message_id="3"),
        dedupe_key="k3",
        session_key=other_key,
        agent_id="main",
        owned=False,
    )
    # Just stored: left to the receiver's claim or nudge, except the one whose lease lapsed.
    assert await peer.claimable_sessions(utcnow() - timedelta(seconds=1)) == [KEY]
    later = utcnow() + timedelta(seconds=1)
    assert await peer.claimable_sessions(later) == [KEY, other_key]
    assert [e.id for e in await peer.claim_session(KEY)] == [first, second]
    assert await peer.claim_session(KEY) == []  # claimed once
    assert await peer.claimable_sessions(later) == [other_key]
    assert third is not None

    assert not await slow.start(first)
    assert not await slow.confirm(first)
    assert not await slow.save_answer(first, "late")
    assert not await slow.add_part(first, ["m-1"], last=True, answer="late")
    await slow.finish(first, InboxState.FAILED, "late")
    await slow.release(first, "late")
    entry = await peer.get(first)
    assert entry is not None
    assert (entry.owner, entry.state, entry.answer) == ("peer", InboxState.RUNNING, None)
    assert await peer.confirm(first)
    assert await peer.add_part(first, ["m-1"], last=True, answer="on time")

    # A live process still working on a session keeps its next messages from being claimed
    # elsewhere (answered out of order), even by a process that believes it holds the session.
    busy_key = KEY + ":busy"
    alive = SqlInbox(db, owner="alive")
    await alive.add(message("d", message_id="4"), session_key=busy_key, agent_id="main")
    await peer.accept(
        message("e", message_id="5"),
        dedupe_key="k5",
        session_key=busy_key,
        agent_id="main",
        owned=False,
    )
    assert await peer.claim_session(busy_key) == []


async def accepted(
    inbox: SqlInbox, body: str, *, owned: bool, session: str = KEY, kept: bool = False
) -> int:
    """``body`` stored by ``inbox`` (``kept``: running and behind_waiting, as the holder of
    the session keeps a message); its entry id."""
    entry_id = await inbox.accept(
        message(body, message_id=body),
        dedupe_key=f"k-{body}",
        session_key=session,
        agent_id="main",
        running=kept,
        owned=owned,
        behind_waiting=kept,
    )
    assert entry_id is not None
    return entry_id


async def test_a_kept_message_is_stored_behind_an_older_one_waiting_for_a_claim(
    db: Database,
) -> None:
    """accept(behind_waiting=True): the holder of a session keeps a new message as its own,
    unless an older entry of the session waits unowned (or is another process's): then it
    is stored unowned and queued too, and the session's claim takes both in order."""
    holder, peer = SqlInbox(db, owner="holder"), SqlInbox(db, owner="peer")
    alone = await accepted(holder, "a", owned=True, session=KEY + ":alone", kept=True)
    assert holder.holds(alone)
    waiting = await accepted(peer, "b", owned=False)
    behind = await accepted(holder, "c", owned=True, kept=True)
    assert not holder.holds(behind)
    entry = await holder.get(behind)
    assert entry is not None
    assert (entry.state, entry.attempts, entry.owner) == (InboxState.QUEUED, 0, None)
    assert [e.id for e in await holder.claim_session(KEY)] == [waiting, behind]


async def test_a_claim_for_an_idle_session_starts_its_oldest_fresh_entry(db: Database) -> None:
    """claim_and_start: the oldest entry claimed is marked running (one more attempt) in the
    claim itself when nobody ran it yet; one an earlier process started is only claimed (the
    replay resumes it), and the rest stay queued."""
    receiver, holder = SqlInbox(db, owner="receiver"), SqlInbox(db, owner="holder")
    first = await accepted(receiver, "a", owned=False)
    second = await accepted(receiver, "b", owned=False)
    entries, started = await holder.claim_and_start(KEY)
    assert [e.id for e in entries] == [first, second] and started == first
    states = [(e.state, e.attempts, e.owner) for e in entries]
    assert states == [(InboxState.RUNNING, 1, "holder"), (InboxState.QUEUED, 0, "holder")]
    assert await holder.confirm(first)  # the claim's lease counts as this process's write
    assert await holder.claim_and_start(KEY) == ([], None)  # claimed once

    # Left running by a process whose lease ran out: claimed, not started again.
    dead = SqlInbox(db, owner="dead", lease_seconds=-1)
    other = KEY + ":other"
    left = await dead.add(message("c", message_id="c"), session_key=other, agent_id="main")
    await dead.start(left)
    entries, started = await holder.claim_and_start(other)
    assert started is None
    assert [(e.id, e.state, e.attempts, e.owner) for e in entries] == [
        (left, InboxState.RUNNING, 1, "holder")
    ]


async def test_a_confirm_early_in_the_lease_is_answered_without_the_database(
    db: Database,
) -> None:
    """Nobody takes an entry before its lease ran out, so within the first half of the lease
    this process wrote, confirm trusts it; later (a long run, a stall) it asks the database,
    which also says when the entry was taken over meanwhile."""

    async def hand_to(entry_id: int, owner: str) -> None:  # behind the holder's back
        statement = update(InboxRow).where(InboxRow.id == entry_id).values(owner=owner)
        await db.run_write(lambda conn: conn.execute(statement))

    holder = SqlInbox(db, owner="holder", lease_seconds=60)
    entry = await holder.add(message("a", message_id="c-1"), session_key=KEY, agent_id="main")
    assert await holder.start(entry)
    await hand_to(entry, "elsewhere")
    assert await holder.confirm(entry)  # 60 s left of its lease: no round trip
    assert not await holder.save_answer(entry, "x")  # a write still checks, and tells
    assert not await holder.confirm(entry)  # from then on the database answers

    stalled = SqlInbox(db, owner="stalled", lease_seconds=60)
    taken = await stalled.add(message("b", message_id="c-2"), session_key=KEY, agent_id="main")
    assert await stalled.confirm(taken)
    stalled.lease = timedelta(seconds=-1)  # as if its last write were older than the lease
    assert await stalled.renew_leases() == 1
    await hand_to(taken, "elsewhere")
    assert not await stalled.confirm(taken)
    assert await stalled.renew_leases() == 0  # what was taken is not renewed, nor trusted
    stalled.lease = timedelta(seconds=60)
    assert not await stalled.confirm(taken)


async def test_accept_stores_once_per_key_and_nothing_when_the_entry_fails(db: Database) -> None:
    """The dedupe record and the entry go together (one statement on Postgres, a transaction
    on SQLite): a redelivery stores nothing, an entry that can't be stored records no key."""
    inbox = SqlInbox(db, owner="p")
    msg = message("hi", message_id="acc-1")
    first = await inbox.accept(
        msg, dedupe_key="acc:1", session_key=KEY, agent_id="main", running=True
    )
    assert first is not None
    again = await inbox.accept(msg, dedupe_key="acc:1", session_key=KEY, agent_id="main")
    assert again is None
    entry = await inbox.get(first)
    assert entry is not None
    assert (entry.state, entry.owner, entry.message.text) == (InboxState.RUNNING, "p", "hi")
    unowned = await inbox.accept(
        message("later", message_id="acc-2"),
        dedupe_key="acc:2",
        session_key=KEY,
        agent_id="main",
        running=True,
        owned=False,
    )
    assert unowned is not None
    entry = await inbox.get(unowned)
    assert entry is not None and (entry.state, entry.owner) == (InboxState.QUEUED, None)
    # Postgres refuses the entry's agent id (longer than its column) after the record was
    # inserted in the same statement; SQLite checks no length, but can't bind a dict.
    refused: object = "a" * 65 if db.dialect == "postgresql" else {"not": "a string"}
    with pytest.raises(Exception, match=r"(?i)too long|not supported"):
        await inbox.accept(
            message("x", message_id="acc-3"),
            dedupe_key="acc:3",
            session_key=KEY,
            agent_id=refused,  # type: ignore[arg-type]
        )
    assert not await SqlDedupeStore(db).has_seen("acc:3")


async def test_retry_forgets_the_old_answer_and_prune_keeps_recent(db: Database) -> None:
    inbox = SqlInbox(db, owner="p")
    entry_id = await inbox.add(message("x"), session_key=KEY, agent_id="main")
    await inbox.save_answer(entry_id, "half")
    await inbox.add_part(entry_id, ["1"], last=False)
    await inbox.finish(entry_id, InboxState.FAILED, "delivery: Forbidden")
    listed = await inbox.unanswered()
    assert [(e.id, e.state, e.reason) for e in listed] == [
        (entry_id, InboxState.FAILED, "delivery: Forbidden")
    ]
    entry = await inbox.retry(entry_id)
    assert entry is not None
    assert (entry.state, entry.answer, entry.parts, entry.owner) == (
        InboxState.QUEUED,
        None,
        [],
        None,
    )
    assert await inbox.retry(entry_id + 100) is None
    await inbox.finish(entry_id, InboxState.DROPPED, "stopped")
    assert await inbox.prune(timedelta(days=7)) == 0
    assert await inbox.prune(timedelta(seconds=-1)) == 1
    with pytest.raises(ValueError):
        await inbox.finish(entry_id, InboxState.QUEUED)


# --- what the pipeline records --------------------------------------------------------------


async def test_an_answered_message_records_its_parts(
    app: Loopgate, dm: ChatDriver, llm: FakeLLM
) -> None:
    llm.script(text("hello back"))
    await dm.ask("hello")
    assert app.inbox is not None
    assert await entries(app) == []  # nothing unanswered
    row = await app.db.run_read(
        lambda conn: conn.execute(sql("SELECT state, answer, parts FROM inbox")).one()
    )
    sent = [o.message_id for o in dm.outbound if o.kind == "message"]
    assert row.state == "answered" and row.answer == "hello back"
    assert row.parts in (sent, str(sent).replace("'", '"'))  # JSON text on SQLite


async def test_stop_and_queue_overflow_end_as_dropped(
    app: Loopgate, dm: ChatDriver, llm: FakeLLM
) -> None:
    llm.script(delay(30, text("never")))
    first = await dm.send("long task")
    await dm.wait_for(lambda: app.registry.active_runs == 1)
    queued = await dm.send("and then this")
    await dm.send("/stopall")
    assert first is not None and queued is not None
    await asyncio.wait_for(asyncio.gather(first, queued), 5)

    async def both_dropped() -> bool:  # the drop callback records after settling the job
        found = await entries(app)
        return len(found) == 2 and all(e.state is InboxState.DROPPED for e in found)

    await wait_until(both_dropped, 5)
    states = {e.message.text: (e.state, e.reason) for e in await entries(app)}
    assert states == {
        "long task": (InboxState.DROPPED, "stopped"),
        "and then this": (InboxState.DROPPED, "stopped by /stopall"),
    }


async def test_a_message_that_cannot_be_stored_is_not_accepted(
    app: Loopgate, dm: ChatDriver
) -> None:
    await app.db.run_write(lambda conn: conn.execute(sql("DROP TABLE inbox")))
    msg = dm.message("hello", message_id="lost-1")
    with pytest.raises(NotAccepted):
        await app.gateway.handle(msg)
    # The platform's redelivery must not be taken for a duplicate.
    assert not await SqlDedupeStore(app.db).seen(msg.dedupe_key)


# --- replaying (start-up replay itself: tests/bot/pipeline/test_replay.py) ---------------


async def test_a_half_delivered_answer_resumes_at_the_next_chunk(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm)
    answer = "\n\n".join(f"Part {n}: " + "lorem ipsum " * 600 for n in (1, 2, 3))
    async with Loopgate(config) as probe:
        chunks = render_chunks(answer, "markdown", probe.web.capabilities.max_chars)
    assert len(chunks) == 3
    await left_by_a_dead_process(config, "tell me a lot", answer=answer, parts=["out-1", "out-2"])
    async with Loopgate(config) as app:
        dm = ChatDriver(app, DM)
        await dm.wait_for(lambda: len(dm.texts()) == 1)
        await settled(app)
        assert await entries(app) == []
        await asyncio.sleep(0.1)  # kept (negative check): nothing more comes
    assert dm.texts() == [chunks[2]]
    assert llm.chat_requests == []  # the saved answer is delivered, not a new run


# --- graceful drain -------------------------------------------------------------------------


async def test_drain_lets_a_short_answer_finish(tmp_path: Path, llm: FakeLLM) -> None:
    llm.script(delay(0.3, text("just in time")))
    async with Loopgate(make_config(tmp_path, llm)) as app:
        dm = ChatDriver(app, DM)
        done = await dm.send("quick one")
        await dm.wait_for(lambda: app.registry.active_runs == 1)
        assert await app.drain(grace=10) == 0
        assert done is not None and done.done()
        assert dm.texts() == ["just in time"]
        with pytest.raises(NotAccepted):
            await app.gateway.handle(dm.message("too late"))
        assert await entries(app) == []


async def test_drain_hands_unfinished_work_to_the_next_process(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm)
    llm.script(delay(30, text("never seen")), text("answer to the first"), text("second"))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, DM)
        await dm.send("first")
        await dm.wait_for(lambda: app.registry.active_runs == 1)
        # The run must be waiting on the model (the 30 s answer), not still preparing.
        await until(lambda: llm.chat_requests, lambda: "no model call")
        await dm.send("second")  # queued behind the first
        assert await app.drain(grace=0.2) == 1
    # The cancelled run cleaned up while the channel was open, and sent nothing.
    assert dm.texts() == []
    assert dm.kinds()[-1] == "reaction_removed" and "typing" not in dm.kinds()[-1:]
    async with await open_database(config.database.url) as db:
        left = sorted(await SqlInbox(db).unanswered(), key=lambda e: e.id)
    assert [(e.message.text, e.state, e.reason) for e in left] == [
        ("first", InboxState.QUEUED, "interrupted by shutdown"),
        ("second", InboxState.QUEUED, None),
    ]
    async with Loopgate(config) as app:
        dm = ChatDriver(app, DM)
        await dm.wait_for(lambda: len(dm.texts()) == 2)
        assert dm.texts() == ["answer to the first", "second"]


async def test_a_shutdown_waits_for_the_chunk_being_sent(tmp_path: Path, llm: FakeLLM) -> None:
    """A chunk the platform took but the inbox did not record would be sent twice."""
    config = make_config(tmp_path, llm)
    llm.script(text("the answer"))
    sending, platform_answers = asyncio.Event(), asyncio.Event()

    async def slow_platform(record: Outbound) -> None:
        if record.kind == "message":
            sending.set()
            await platform_answers.wait()

    app = Loopgate(config)
    await app.start()
    app.web.listen(DM.chat_id, slow_platform)
    done = await ChatDriver(app, DM).send("hi")
    await asyncio.wait_for(sending.wait(), 10)
    closing = asyncio.create_task(app.aclose())  # cancels the turn mid-send

    def turn_cancelled() -> bool:  # the shutdown reached the turn while the platform is slow
        return any(t.get_name().startswith("run:") and t.cancelling() for t in asyncio.all_tasks())

    await wait_until(turn_cancelled, 5)
    platform_answers.set()
    await asyncio.wait_for(closing, 10)
    assert done is not None and done.done()
    async with await open_database(config.database.url) as db:
        assert await SqlInbox(db).unanswered() == []  # answered, not handed back


async def test_a_process_that_lost_its_entry_meanwhile_sends_nothing(
    tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several processes: while the model answered, another process took the entry over (this
    one had stalled past its lease). The answer is not sent here; the entry stays the other's."""
    llm.script(delay(0.5, text("late answer")))
    async with Loopgate(make_config(tmp_path, llm)) as app:
        assert app.inbox is not None
        app.inbox.shared = True
        dm = ChatDriver(app, DM)
        done = await dm.send("a question")
        assert done is not None
        await dm.wait_for(lambda: app.registry.active_runs == 1)
        [entry] = await entries(app)
        statement = (
            update(InboxRow)
            .where(InboxRow.id == entry.id)
            .values(owner="peer", lease_until=utcnow() + timedelta(minutes=1))
        )
        await app.db.run_write(lambda conn: conn.execute(statement))
        # The stall: when this process resumes, its lease is over. Within the first half of
        # it, it would rightly trust that nobody took the entry (SqlInbox.confirm).
        later = utcnow() + app.inbox.lease
        monkeypatch.setattr(inbox_module, "utcnow", lambda: later)
        with capture_logs() as logs:
            await asyncio.wait_for(done, 5)
        assert dm.texts() == []
        assert any(e["event"] == "inbox.taken_over" for e in logs)
        after = await state_of(app, entry.id)
        assert (after.owner, after.state) == ("peer", InboxState.RUNNING)
