"""A burst of messages is one turn (``bot/pipeline/bursts.py``): ``bot.debounce_ms`` and
``bot.queue_mode``, end to end through the local web channel, the gateway, the inbox and the fake
LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import select

from agent_core import RunResult, RunStatus
from bot.app import Loopgate
from bot.pipeline.commands import HELP_TEXT
from bot.storage import SqlSessionStore
from bot.storage.models import InboxRow
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.pipeline_support import reactions_left as shown_reactions
from tests.waiting import wait_until

DM_KEY = "agent:main:web:direct:dm-alice"
Done = asyncio.Future[RunResult | None]


@asynccontextmanager
async def started(tmp_path: Path, llm: FakeLLM, **bot: Any) -> AsyncIterator[Loopgate]:
    async with Loopgate(make_config(tmp_path, llm, bot=bot)) as app:
        yield app


def dm_of(app: Loopgate) -> ChatDriver:
    return ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))


async def send(chat: ChatDriver, text: str, **kw: Any) -> Done:
    done = await chat.send(text, **kw)
    assert done is not None, f"{text!r} was not queued"
    return done


async def results(*futures: Done) -> list[RunResult | None]:
    return list(await asyncio.wait_for(asyncio.gather(*futures), 15))


def asked(llm: FakeLLM) -> list[str]:
    """The user message of each model call, in order."""
    return [r.json["messages"][-1]["content"] for r in llm.chat_requests]


async def inbox(app: Loopgate) -> list[tuple[int, str, str, str | None]]:
    """(id, text, state, reason) of every inbox entry, oldest first."""
    query = select(InboxRow).order_by(InboxRow.id)
    rows = await app.db.run_read(lambda conn: conn.execute(query).all())
    return [(row.id, row.message["text"], row.state, row.reason) for row in rows]


async def all_ended(app: Loopgate) -> None:
    assert app.inbox is not None
    assert await app.inbox.counts() == {"queued": 0, "running": 0}


async def reactions_left(chat: ChatDriver) -> dict[str, list[str]]:
    """What status reactions are still shown, per message id (nothing may hang), once the
    cleanups that follow the turns are done."""
    await chat.app.gateway.turns.cleanups.flushed(15)
    return shown_reactions(chat.outbound)


class TestDebounce:
    async def test_a_burst_within_the_window_is_one_turn(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(text("One answer for all three."))
        async with started(tmp_path, llm, debounce_ms=2_000) as app:
            dm = dm_of(app)
            # Each message restarts the window: the burst spans more than the 2 s window in all.
            # Kept sleeps: the test times the burst itself. Each gap is well under the window so
            # that a loaded machine (a slow store, a late wake-up) can't end the window early.
            one = await send(dm, "one", message_id="m-1")
            await asyncio.sleep(0.8)
            two = await send(dm, "two", message_id="m-2")
            await asyncio.sleep(0.8)
            three = await send(dm, "three", message_id="m-3")
            await asyncio.sleep(0.8)
            assert llm.chat_requests == []  # still waiting for the quiet window
            assert app.gateway.scheduler.lanes == 0
            first, second, last = await results(one, two, three)
            assert asked(llm) == ["one\n\ntwo\n\nthree"]
            assert dm.texts() == ["One answer for all three."]
            assert last is not None and last.status is RunStatus.COMPLETED
            assert first is last and second is last  # every message's job has the turn's result
            history = await SqlSessionStore(app.db).load_history(DM_KEY)
            assert [(m.role, m.content) for m in history.messages] == [
                ("user", "one\n\ntwo\n\nthree"),
                ("assistant", "One answer for all three."),
            ]
            # Each message was stored on its own; the earlier two ended with the turn.
            rows = await inbox(app)
            last_id = rows[-1][0]
            assert [(t, state, reason) for _, t, state, reason in rows] == [
                ("one", "answered", f"merged into entry {last_id}"),
                ("two", "answered", f"merged into entry {last_id}"),
                ("three", "answered", None),
            ]
            await all_ended(app)
            # 👀 went on each message as it arrived and came off every one of them.
            received = [o.message_id for o in dm.outbound if o.kind == "reaction"]
            assert received[:3] == ["m-1", "m-2", "m-3"]
            assert await reactions_left(dm) == {}

    async def test_a_burst_cut_short_by_a_restart_is_answered_by_the_next_process(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        async with started(tmp_path, llm, debounce_ms=10_000) as app:
            dm = dm_of(app)
            one, two = await send(dm, "one"), await send(dm, "two")
            # Stored when handle returned (the platform may be acknowledged), before any turn.
            assert [(t, state) for _, t, state, _ in await inbox(app)] == [
                ("one", "queued"),
                ("two", "queued"),
            ]
        assert await results(one, two) == [None, None]
        assert llm.chat_requests == []
        async with started(tmp_path, llm) as app:
            assert app.inbox is not None
            inbox_of_app = app.inbox

            async def drained() -> bool:
                return not sum((await inbox_of_app.counts()).values())

            await wait_until(drained, 10)
            assert sorted(asked(llm)) == ["one", "two"]  # replayed entries run as they were
            assert [state for _, _, state, _ in await inbox(app)] == ["answered", "answered"]

    async def test_commands_are_never_merged_and_act_at_once(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(text("merged"))
        # A window wide enough for a command's reply in between on a loaded machine (CI once
        # took over 400 ms for "/help" there, and "two" became a turn of its own).
        async with started(tmp_path, llm, debounce_ms=1_500) as app:
            dm = dm_of(app)
            one = await send(dm, "one")
            assert await dm.send("/help") is None
            assert dm.texts() == [HELP_TEXT]  # answered before the window passed
            two = await send(dm, "two")
            await results(one, two)
            assert asked(llm) == ["one\n\ntwo"]  # the command is not part of the turn
            assert dm.texts() == [HELP_TEXT, "merged"]

            # /stop while a burst waits for its window: the burst never runs.
            three = await send(dm, "three")
            assert await dm.send("/stop") is None
            assert await results(three) == [None]
            await asyncio.sleep(1.7)  # kept (negative check): past the window, nothing runs
            assert len(llm.chat_requests) == 1
            assert dm.texts()[-1] == "Stopped."
            assert (await inbox(app))[-1][1:] == ("three", "dropped", "stopped by /stop")
            # /stopall too.
            four = await send(dm, "four")
            assert await dm.send("/stopall") is None
            assert await results(four) == [None]
            assert dm.texts()[-1] == "Stopped."
            assert (await inbox(app))[-1][1:] == ("four", "dropped", "stopped by /stopall")
            await asyncio.sleep(1.7)  # kept (negative check): past the window, nothing runs
            assert len(llm.chat_requests) == 1
            await all_ended(app)
            assert await reactions_left(dm) == {}

    async def test_zero_adds_no_merging_and_no_wait(self, app: Loopgate, llm: FakeLLM) -> None:
        assert app.config.bot.debounce_ms == 0
        dm = dm_of(app)
        llm.script(text("first"), text("second"))
        job = await app.gateway.handle(dm.message("one"))
        # Running before handle returned: stored as running, no timer in between.
        assert job is not None and job.started
        assert app.gateway.scheduler.lanes == 1 and app.gateway.scheduler.queued(DM_KEY) == []
        await asyncio.wait_for(job.done, 10)
        two = await send(dm, "two")
        await results(two)
        assert asked(llm) == ["one", "two"]
        assert dm.texts() == ["first", "second"]
        assert [state for _, _, state, _ in await inbox(app)] == ["answered", "answered"]


async def two_behind_a_run(dm: ChatDriver, llm: FakeLLM) -> list[Done]:
    """ "one" runs (its answer is scripted slow), then "two" and "three" arrive."""
    one = await send(dm, "one", message_id="m-1")
    await dm.wait_for(lambda: len(llm.chat_requests) == 1)
    two = await send(dm, "two", message_id="m-2")
    three = await send(dm, "three", message_id="m-3")
    return [one, two, three]


class TestQueueModes:
    async def test_followup_answers_each_queued_message_on_its_own(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(delay(0.5, text("for one")), text("for two"), text("for three"))
        async with started(tmp_path, llm, queue_mode="followup") as app:
            dm = dm_of(app)
            await results(*await two_behind_a_run(dm, llm))
            assert asked(llm) == ["one", "two", "three"]
            assert dm.texts() == ["for one", "for two", "for three"]
            rows = await inbox(app)
            assert [(t, state, reason) for _, t, state, reason in rows] == [
                ("one", "answered", None),
                ("two", "answered", None),
                ("three", "answered", None),
            ]
            await all_ended(app)

    async def test_collect_makes_what_queued_during_a_run_one_turn(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(delay(0.5, text("for one")), text("for two and three"))
        async with started(tmp_path, llm) as app:  # collect is the default
            assert app.config.bot.queue_mode == "collect"
            dm = dm_of(app)
            r1, r2, r3 = await results(*await two_behind_a_run(dm, llm))
            assert asked(llm) == ["one", "two\n\nthree"]
            assert dm.texts() == ["for one", "for two and three"]
            assert r1 is not None and r1.content == "for one"
            assert r2 is r3 and r3 is not None and r3.content == "for two and three"
            rows = await inbox(app)
            merged_id = rows[2][0]
            assert [(t, state, reason) for _, t, state, reason in rows] == [
                ("one", "answered", None),
                ("two", "answered", f"merged into entry {merged_id}"),
                ("three", "answered", None),
            ]
            await all_ended(app)
            assert await reactions_left(dm) == {}
            assert "m-2" in {o.message_id for o in dm.outbound if o.kind == "reaction_removed"}

    async def test_interrupt_cancels_the_run_and_answers_both_in_one_turn(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("never sent")), delay(0.5, text("Both, at once.")))
        async with started(tmp_path, llm, queue_mode="interrupt") as app:
            dm = dm_of(app)
            one = await send(dm, "one", message_id="m-1")
            await dm.wait_for(lambda: len(llm.chat_requests) == 1 and app.registry.active_runs)
            two = await send(dm, "two", message_id="m-2")
            interrupted = await results(one)
            assert interrupted[0] is not None and interrupted[0].status is RunStatus.CANCELLED
            await dm.wait_for(lambda: len(llm.chat_requests) == 2)
            # While they are answered together, the interrupted message is pending again: a
            # restart now would run it, not lose it.
            assert (await inbox(app))[0][1:] == (
                "one",
                "queued",
                "interrupted: answered with newer messages",
            )
            (answered,) = await results(two)
            assert answered is not None and answered.content == "Both, at once."
            assert asked(llm) == ["one", "one\n\ntwo"]
            assert dm.texts() == ["Both, at once."]  # no "Stopped."
            history = await SqlSessionStore(app.db).load_history(DM_KEY)
            assert [(m.role, m.content) for m in history.messages] == [
                ("user", "one\n\ntwo"),
                ("assistant", "Both, at once."),
            ]
            rows = await inbox(app)
            assert [(t, state, reason) for _, t, state, reason in rows] == [
                ("one", "answered", f"merged into entry {rows[1][0]}"),
                ("two", "answered", None),
            ]
            await all_ended(app)
            assert await reactions_left(dm) == {}
            assert app.registry.active_runs == 0


class TestGroups:
    async def test_a_burst_is_one_senders_and_the_reply_quotes_its_last_message(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        # Alice's answer is slow enough for the thinking reaction (debounced 0.7 s) to show.
        llm.route("user web:alice", delay(1.2, text("for alice")))
        llm.route("user web:bob", text("for bob"))
        async with started(tmp_path, llm, debounce_ms=300) as app:
            group = ChatDriver(app, ChatRef("web", "room-1", ChatType.GROUP))
            a1 = await send(group, "alice 1", sender="alice", message_id="a-1")
            b1 = await send(group, "bob 1", sender="bob", message_id="b-1")
            a2 = await send(group, "alice 2", sender="alice", message_id="a-2")
            await results(a1, b1, a2)
            assert sorted(asked(llm)) == ["alice 1\n\nalice 2", "bob 1"]
            replies = {o.text: o.reply_to for o in group.outbound if o.kind == "message"}
            assert replies == {"for alice": "a-2", "for bob": "b-1"}
            progress = [o.message_id for o in group.outbound if o.text == "🤔"]
            assert progress and set(progress) == {"a-2"}  # status goes on the last message
            assert await reactions_left(group) == {}
            await all_ended(app)

    async def test_interrupt_cancels_only_the_senders_own_run(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.route("user web:alice", delay(30, text("never")), text("alice, both"))
        llm.route("user web:bob", text("for bob"))
        async with started(tmp_path, llm, queue_mode="interrupt") as app:
            group = ChatDriver(app, ChatRef("web", "room-1", ChatType.GROUP))
            a1 = await send(group, "alice 1", sender="alice")
            await group.wait_for(lambda: app.registry.active_runs == 1)
            (bob,) = await results(await send(group, "bob 1", sender="bob"))
            assert bob is not None and bob.content == "for bob"
            assert not a1.done()  # bob's message did not touch alice's run
            a2 = await send(group, "alice 2", sender="alice")
            first, second = await results(a1, a2)
            assert first is not None and first.status is RunStatus.CANCELLED
            assert second is not None and second.content == "alice, both"
            assert asked(llm)[-1] == "alice 1\n\nalice 2"
            assert sorted(group.texts()) == ["alice, both", "for bob"]
            await all_ended(app)
