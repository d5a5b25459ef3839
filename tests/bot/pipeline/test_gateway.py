"""``Gateway`` on its own, through its public methods: a recording channel, a scripted agent,
an in-memory dedupe store and (where it matters) the real inbox on a temporary SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_core import EventBus, RunRequest, RunResult, RunStatus
from agent_core.orchestration.children import Announcement, ChildRun
from bot.config import Config, parse_config
from bot.pipeline.access import Decision
from bot.pipeline.commands import HELP_TEXT
from bot.pipeline.dedupe import MemoryDedupe
from bot.pipeline.gateway import Gateway
from bot.pipeline.job import Job
from bot.pipeline.run_registry import LocalRunRegistry
from bot.pipeline.session_keys import session_key
from bot.storage.inbox import InboxEntry, InboxState, SqlInbox
from channels import ChatRef, ChatType, InboundMessage, NotAccepted
from tests.pipeline_support import (
    DM,
    GROUP,
    FakeAgent,
    FakeSessions,
    Hold,
    RecordingChannel,
    message,
    settled,
    sqlite_db,
    sqlite_inbox,
)

DM_KEY = session_key("main", DM)
GROUP_KEY = session_key("main", GROUP)


class DenyAll:
    """An access policy refusing everything, with ``reply`` for the user when set."""

    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.checked: list[InboundMessage] = []

    async def check(self, msg: InboundMessage) -> Decision:
        self.checked.append(msg)
        return Decision(False, "denied_for_test", self.reply)


class BrokenDedupe:
    async def seen(self, key: str) -> bool:
        raise OSError("database is down")

    async def forget(self, key: str) -> None:
        pass


class BrokenInbox(SqlInbox):
    async def accept(self, msg: InboundMessage, **kw: Any) -> int | None:
        raise OSError("database is down")


class Harness:
    def __init__(self, gateway: Gateway, channel: RecordingChannel, agent: FakeAgent) -> None:
        self.gateway = gateway
        self.channel = channel
        self.agent = agent
        self.sessions: FakeSessions = gateway.sessions  # type: ignore[assignment]
        self.registry: LocalRunRegistry = gateway.registry  # type: ignore[assignment]

    async def send(self, text: str, **kw: Any) -> Job | None:
        return await self.gateway.handle(message(text, **kw))

    async def queued(self, text: str, **kw: Any) -> Job:
        job = await self.send(text, **kw)
        assert job is not None, f"{text!r} was not queued"
        return job

    async def running(self, text: str, hold: Hold, **kw: Any) -> Job:
        """A message whose run is going (held until the test releases ``hold``)."""
        self.agent.script(hold)
        job = await self.queued(text, **kw)
        await self.agent.wait_for(lambda: job.run_id in {r.run_id for r in self.agent.requests})
        return job


def config(**bot: Any) -> Config:
    return parse_config({"bot": {"typing_interval": 0.01, **bot}}, {})


@asynccontextmanager
async def gateway(
    *,
    inbox: SqlInbox | None = None,
    access: Any = None,
    dedupe: Any = None,
    channel: RecordingChannel | None = None,
    **bot: Any,
) -> AsyncIterator[Harness]:
    channel = channel or RecordingChannel()
    agent = FakeAgent()
    gw = Gateway(
        config(**bot),
        router=agent,  # type: ignore[arg-type]
        registry=LocalRunRegistry(),
        dedupe=dedupe or MemoryDedupe(),
        events=EventBus(),
        sessions=FakeSessions(),
        access=access,
        inbox=inbox,
    )
    gw.add_channel(channel)
    try:
        yield Harness(gw, channel, agent)
    finally:
        await gw.aclose()


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[SqlInbox]:
    async with sqlite_inbox(tmp_path) as box:
        yield box


async def entries(inbox: SqlInbox) -> list[tuple[str, InboxState, str | None]]:
    """(text, state, reason) of every entry, oldest first."""
    found = []
    for entry_id in range(1, 100):
        entry = await inbox.get(entry_id)
        if entry is None:
            break
        found.append((entry.message.text, entry.state, entry.reason))
    return found


class TestMessages:
    async def test_a_message_is_stored_queued_and_answered(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.agent.script("Hello!")
            job = await h.queued("hi", message_id="m-1")
            assert job.inbox_id is not None and job.session_key == DM_KEY
            assert job.agent_id == "main" and job.requester_id == "alice"
            (result,) = await settled(job.done)
            assert result.content == "Hello!"
            assert h.channel.texts() == ["Hello!"]
            assert h.agent.asked() == ["hi"]
            assert await entries(inbox) == [("hi", InboxState.ANSWERED, None)]
            await h.gateway.turns.cleanups.flushed(5)  # the last reaction follows the turn
            assert h.channel.reactions_left() == {}
            assert "m-1" in {r.message_id for r in h.channel.records if r.kind == "reaction"}

    async def test_a_duplicate_is_not_queued_twice(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            first = await h.queued("hi", message_id="m-1")
            assert await h.send("hi", message_id="m-1") is None  # a platform's redelivery
            await settled(first.done)
            assert h.agent.asked() == ["hi"] and h.channel.texts() == ["ok"]
            assert len(await entries(inbox)) == 1

    async def test_a_duplicate_is_not_queued_twice_without_an_inbox(self) -> None:
        async with gateway() as h:
            first = await h.queued("hi", message_id="m-1")
            assert await h.send("hi", message_id="m-1") is None
            await settled(first.done)
            assert h.agent.asked() == ["hi"]

    async def test_the_same_message_id_in_another_chat_is_a_new_message(self) -> None:
        async with gateway() as h:
            one = await h.queued("hi", message_id="m-1")
            other_chat = ChatRef("web", "dm-bob", ChatType.DIRECT)
            two = await h.queued("hi", message_id="m-1", chat=other_chat, sender="bob")
            await settled(one.done, two.done)
            assert len(h.agent.requests) == 2

    @pytest.mark.parametrize("text", ["", "   ", "\n\t"])
    async def test_empty_text_is_skipped(self, inbox: SqlInbox, text: str) -> None:
        async with gateway(inbox=inbox) as h:
            assert await h.send(text) is None
            assert await entries(inbox) == [] and h.channel.records == []

    async def test_a_channel_without_a_section_gets_the_default_agent(self) -> None:
        async with gateway() as h:
            assert h.gateway.agent_for("web") == h.gateway.config.agents.default


class TestAccess:
    async def test_an_unaddressed_group_message_is_skipped_silently(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            assert await h.send("just chatting", chat=GROUP, addressed=False) is None
            assert h.channel.records == [] and h.agent.requests == []
            assert await entries(inbox) == []

    async def test_a_denial_with_a_reply_is_answered_once(self, inbox: SqlInbox) -> None:
        access = DenyAll(reply="Your pairing code is ABCD.")
        async with gateway(inbox=inbox, access=access) as h:
            assert await h.send("hi", message_id="m-1") is None
            assert h.channel.texts() == ["Your pairing code is ABCD."]
            assert await h.send("hi", message_id="m-1") is None  # redelivery: not again
            assert h.channel.texts() == ["Your pairing code is ABCD."]
            assert h.agent.requests == [] and await entries(inbox) == []

    async def test_a_denial_without_a_reply_sends_nothing(self) -> None:
        async with gateway(access=DenyAll()) as h:
            assert await h.send("hi") is None
            assert h.channel.records == [] and h.agent.requests == []


class TestCommands:
    async def test_help_is_answered_at_once_and_only_once(self) -> None:
        async with gateway() as h:
            assert await h.send("/help", message_id="c-1") is None
            assert h.channel.texts() == [HELP_TEXT]
            assert await h.send("/help", message_id="c-1") is None  # redelivery
            assert h.channel.texts() == [HELP_TEXT]
            assert h.agent.requests == []

    async def test_commands_go_before_access_and_the_inbox(self, inbox: SqlInbox) -> None:
        access = DenyAll(reply="denied")
        async with gateway(inbox=inbox, access=access) as h:
            assert await h.send("/help") is None
            assert h.channel.texts() == [HELP_TEXT]
            assert access.checked == [] and await entries(inbox) == []

    async def test_a_command_for_another_bot_is_an_ordinary_message(self) -> None:
        async with gateway() as h:
            job = await h.queued("/help@otherbot", metadata={"bot_username": "mybot"})
            await settled(job.done)
            assert h.agent.asked() == ["/help@otherbot"]
            assert h.channel.texts() == ["ok"]

    async def test_a_command_addressed_to_this_bot_is_handled(self) -> None:
        async with gateway() as h:
            assert await h.send("/help@MyBot", metadata={"bot_username": "mybot"}) is None
            assert h.channel.texts() == [HELP_TEXT]

    async def test_reset_starts_a_new_conversation(self) -> None:
        async with gateway() as h:
            assert await h.send("/reset") is None
            assert h.sessions.resets == [DM_KEY]
            assert h.channel.texts() == ["New conversation started."]
            assert h.agent.requests == []

    async def test_stop_with_nothing_running(self) -> None:
        async with gateway() as h:
            assert await h.send("/stop") is None
            assert h.channel.texts() == [h.gateway.config.bot.nothing_to_stop_reply]

    async def test_stop_acts_at_once_on_the_running_answer(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            hold = Hold("never sent")
            job = await h.running("long question", hold)
            assert await h.send("/stop") is None  # not queued behind the run it stops
            (result,) = await settled(job.done)
            assert result.status is RunStatus.CANCELLED and hold.cancelled
            assert h.channel.texts() == [h.gateway.config.bot.stop_reply]
            assert await entries(inbox) == [("long question", InboxState.DROPPED, "stopped")]
            assert h.registry.active_runs == 0

    async def test_stop_is_deduped(self) -> None:
        async with gateway() as h:
            hold = Hold("second answer")
            first = await h.running("one", Hold())
            assert await h.send("/stop", message_id="c-1") is None
            await settled(first.done)
            second = await h.running("two", hold)
            # The platform delivers the same /stop again: it must not stop the new run.
            assert await h.send("/stop", message_id="c-1") is None
            hold.release.set()
            (result,) = await settled(second.done)
            assert result.content == "second answer"
            assert h.channel.texts() == ["Stopped.", "second answer"]

    async def test_a_dedupe_store_failure_refuses_the_command(self) -> None:
        async with gateway(dedupe=BrokenDedupe()) as h:
            with pytest.raises(NotAccepted):
                await h.send("/help")
            assert h.channel.records == []


class TestStopInGroups:
    async def test_only_the_requester_may_stop_a_run(self) -> None:
        async with gateway() as h:
            hold = Hold("for alice")
            job = await h.running("alice asks", hold, chat=GROUP, sender="alice")
            assert await h.send("/stop", chat=GROUP, sender="bob") is None
            assert h.channel.texts() == [h.gateway.config.bot.not_allowed_reply]
            assert not job.done.done() and not hold.cancelled
            assert await h.send("/stop", chat=GROUP, sender="alice") is None
            (result,) = await settled(job.done)
            assert result.status is RunStatus.CANCELLED
            assert h.channel.texts()[-1] == h.gateway.config.bot.stop_reply

    @pytest.mark.parametrize("how", ["configured", "channel_admin", "platform_flag"])
    async def test_an_admin_may_stop_anyones_run(self, how: str) -> None:
        bot: dict[str, Any] = {"admins": ["web:bob"]} if how == "configured" else {}
        channel = RecordingChannel(admins={"bob"} if how == "channel_admin" else set())
        async with gateway(channel=channel, **bot) as h:
            job = await h.running("alice asks", Hold(), chat=GROUP, sender="alice")
            admin_flag = how == "platform_flag"
            assert await h.send("/stop", chat=GROUP, sender="bob", admin=admin_flag) is None
            (result,) = await settled(job.done)
            assert result.status is RunStatus.CANCELLED
            assert h.channel.texts() == [h.gateway.config.bot.stop_reply]

    async def test_stop_takes_the_senders_newest_run(self) -> None:
        async with gateway() as h:
            older = await h.running("alice 1", Hold(), chat=GROUP, sender="alice")
            newer_hold = Hold()
            newer = await h.running("alice 2", newer_hold, chat=GROUP, sender="alice")
            assert await h.send("/stop", chat=GROUP, sender="alice") is None
            await settled(newer.done)
            assert newer_hold.cancelled and not older.done.done()
            await h.send("/stop", chat=GROUP, sender="alice")
            (result,) = await settled(older.done)
            assert result.status is RunStatus.CANCELLED

    async def test_stopall_stops_the_senders_runs_and_queued_messages(
        self, inbox: SqlInbox
    ) -> None:
        async with gateway(inbox=inbox, group_concurrency=1, queue_mode="followup") as h:
            running = await h.running("alice 1", Hold(), chat=GROUP, sender="alice")
            alice_waits = await h.queued("alice 2", chat=GROUP, sender="alice")
            bob_waits = await h.queued("bob 1", chat=GROUP, sender="bob")
            assert await h.send("/stopall", chat=GROUP, sender="alice") is None
            first, second = await settled(running.done, alice_waits.done)
            assert first.status is RunStatus.CANCELLED and second is None
            (bob,) = await settled(bob_waits.done)  # bob's message was not hers to stop
            assert bob.content == "ok"
            assert h.agent.asked() == ["alice 1", "bob 1"]
            assert h.channel.texts() == [h.gateway.config.bot.stop_reply, "ok"]
            assert await entries(inbox) == [
                ("alice 1", InboxState.DROPPED, "stopped"),
                ("alice 2", InboxState.DROPPED, "stopped by /stopall"),
                ("bob 1", InboxState.ANSWERED, None),
            ]

    async def test_stopall_of_someone_else_is_not_allowed(self) -> None:
        async with gateway() as h:
            job = await h.running("alice asks", Hold("kept"), chat=GROUP, sender="alice")
            assert await h.send("/stopall", chat=GROUP, sender="bob") is None
            assert h.channel.texts() == [h.gateway.config.bot.not_allowed_reply]
            assert not job.done.done()


class TestDropWaiting:
    async def test_drops_what_the_sender_may_stop(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox, group_concurrency=1, queue_mode="followup") as h:
            hold = Hold("first")
            running = await h.running("alice 1", hold, chat=GROUP, sender="alice")
            alice_waits = await h.queued("alice 2", chat=GROUP, sender="alice")
            bob_waits = await h.queued("bob 1", chat=GROUP, sender="bob")
            dropped = h.gateway.drop_waiting(GROUP_KEY, "alice", admin=False)
            assert dropped == [alice_waits]
            assert await settled(alice_waits.done) == [None]
            assert not running.done.done()  # only what waits, never the running answer
            hold.release.set()
            await settled(running.done, bob_waits.done)
            assert h.agent.asked() == ["alice 1", "bob 1"]
            states = await entries(inbox)
            assert states[1] == ("alice 2", InboxState.DROPPED, "stopped by /stopall")

    async def test_an_admin_drops_everything_waiting(self) -> None:
        async with gateway(group_concurrency=1, queue_mode="followup") as h:
            hold = Hold("first")
            running = await h.running("alice 1", hold, chat=GROUP, sender="alice")
            waiting = [
                await h.queued("alice 2", chat=GROUP, sender="alice"),
                await h.queued("bob 1", chat=GROUP, sender="bob"),
            ]
            dropped = h.gateway.drop_waiting(GROUP_KEY, "carol", admin=True)
            assert dropped == waiting
            assert await settled(*(j.done for j in waiting)) == [None, None]
            hold.release.set()
            await settled(running.done)
            assert h.agent.asked() == ["alice 1"]

    async def test_drops_a_burst_still_in_its_debounce_window(self) -> None:
        async with gateway(debounce_ms=60_000) as h:
            job = await h.queued("one")
            assert h.gateway.drop_waiting(DM_KEY, "alice", admin=False) == [job]
            assert await settled(job.done) == [None]
            assert h.agent.requests == []
            assert h.gateway.busy_sessions() == set()


class TestRateLimit:
    async def test_excess_messages_are_skipped_with_one_notice(self, inbox: SqlInbox) -> None:
        limit = {"per_minute": 1, "burst": 2}
        async with gateway(inbox=inbox, sender_rate_limit=limit) as h:
            h.agent.script("NO_REPLY", "NO_REPLY")
            jobs = [await h.queued("one"), await h.queued("two")]
            assert await h.send("three") is None
            assert await h.send("four") is None
            await settled(*(j.done for j in jobs))
            notice = h.gateway.config.bot.rate_limited_reply
            assert h.channel.texts() == [notice]  # told once, not for every message
            assert h.agent.asked() == ["one", "two"]
            assert [text for text, _, _ in await entries(inbox)] == ["one", "two"]
            # Other senders have their own budget.
            bob = await h.queued("bob", chat=ChatRef("web", "dm-bob"), sender="bob")
            await settled(bob.done)

    async def test_a_group_notice_quotes_the_message(self) -> None:
        limit = {"per_minute": 1, "burst": 1}
        async with gateway(sender_rate_limit=limit) as h:
            h.agent.script("NO_REPLY")
            job = await h.queued("one", chat=GROUP)
            assert await h.send("two", chat=GROUP, message_id="m-2") is None
            await settled(job.done)
            assert [(r.text, r.reply_to) for r in h.channel.messages()] == [
                (h.gateway.config.bot.rate_limited_reply, "m-2")
            ]

    @pytest.mark.parametrize("how", ["configured", "platform_flag"])
    async def test_admins_are_exempt(self, how: str) -> None:
        limit = {"per_minute": 1, "burst": 1}
        bot: dict[str, Any] = {"admins": ["alice"]} if how == "configured" else {}
        async with gateway(sender_rate_limit=limit, queue_mode="followup", **bot) as h:
            jobs = [await h.queued(f"m{i}", admin=how == "platform_flag") for i in range(4)]
            await settled(*(j.done for j in jobs))
            assert h.agent.asked() == ["m0", "m1", "m2", "m3"]

    async def test_off_disables_it(self) -> None:
        async with gateway(sender_rate_limit="off", queue_mode="followup") as h:
            jobs = [await h.queued(f"m{i}") for i in range(8)]
            await settled(*(j.done for j in jobs))
            assert len(h.agent.requests) == 8

    async def test_commands_are_not_rate_limited(self) -> None:
        async with gateway(sender_rate_limit={"per_minute": 1, "burst": 1}) as h:
            for i in range(3):
                assert await h.send("/help", message_id=f"c-{i}") is None
            assert h.channel.texts() == [HELP_TEXT] * 3


class TestNotAccepted:
    async def test_refused_when_not_accepting(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.gateway.stop_accepting()
            with pytest.raises(NotAccepted):
                await h.send("hi")
            with pytest.raises(NotAccepted):
                await h.send("/stop")  # commands too: the platform delivers them again
            assert await entries(inbox) == [] and h.channel.records == []

    async def test_refused_when_the_inbox_cannot_store_it(self, tmp_path: Path) -> None:
        async with sqlite_db(tmp_path) as db, gateway(inbox=BrokenInbox(db)) as h:
            with pytest.raises(NotAccepted):
                await h.send("hi", message_id="m-1")
            assert h.agent.requests == [] and h.gateway.busy_sessions() == set()
            assert h.channel.records == []  # no receipt for what was not taken

    async def test_a_refused_message_is_taken_on_redelivery(self, tmp_path: Path) -> None:
        async with sqlite_db(tmp_path) as db, gateway(inbox=FlakyInbox(db)) as h:
            with pytest.raises(NotAccepted):
                await h.send("hi", message_id="m-1")
            job = await h.queued("hi", message_id="m-1")  # the platform's retry
            await settled(job.done)
            assert h.agent.asked() == ["hi"]

    async def test_refused_when_the_dedupe_store_fails_without_an_inbox(self) -> None:
        async with gateway(dedupe=BrokenDedupe()) as h:
            with pytest.raises(NotAccepted):
                await h.send("hi")
            assert h.agent.requests == []


class TestMaxConcurrentRuns:
    async def test_a_chat_over_the_limit_is_stored_queued_and_answered_after(
        self, inbox: SqlInbox
    ) -> None:
        """``bot.max_concurrent_runs``: a message of another chat waits, stored as ``queued``
        (not ``running``, which it is not), and runs once the slot is free."""
        async with gateway(inbox=inbox, max_concurrent_runs=1) as h:
            hold = Hold("first")
            first = await h.running("alice asks", hold)
            bob_dm = ChatRef("web", "dm-bob", ChatType.DIRECT)
            second = await h.queued("bob asks", chat=bob_dm, sender="bob")
            entry = await inbox.get(2)
            assert entry is not None and entry.state is InboxState.QUEUED
            assert h.agent.asked() == ["alice asks"]
            hold.release.set()
            one, two = await settled(first.done, second.done)
            assert (one.content, two.content) == ("first", "ok")
            assert h.agent.asked() == ["alice asks", "bob asks"]
            assert [state for _, state, _ in await entries(inbox)] == [InboxState.ANSWERED] * 2


class TestHandOver:
    """The drain: channels keep receiving, commands act, messages wait for the next process."""

    async def test_a_message_is_stored_unowned_and_not_run(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.gateway.hand_over()
            assert await h.send("arrived during the drain", message_id="m-1") is None
            entry = await inbox.get(1)
            assert entry is not None and entry.state is InboxState.QUEUED
            assert entry.owner is None  # the next process (or a peer) takes it
            assert h.agent.requests == [] and h.gateway.busy_sessions() == set()
            assert h.channel.records == []  # no reaction: nothing runs here
            assert await h.send("arrived during the drain", message_id="m-1") is None
            assert len(await entries(inbox)) == 1  # a redelivery is still one message

    async def test_stop_still_acts_on_the_running_answer(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            hold = Hold("never sent")
            job = await h.running("long question", hold)
            h.gateway.hand_over()
            assert await h.send("/stop") is None
            (result,) = await settled(job.done)
            assert result.status is RunStatus.CANCELLED and hold.cancelled
            assert h.channel.texts() == [h.gateway.config.bot.stop_reply]

    async def test_a_chat_that_lives_in_this_process_is_refused(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.gateway.local_channels = frozenset({h.channel.name})
            h.gateway.hand_over()
            with pytest.raises(NotAccepted):
                await h.send("hi")
            assert await entries(inbox) == []

    async def test_without_an_inbox_nothing_could_keep_it(self) -> None:
        async with gateway() as h:
            h.gateway.hand_over()
            with pytest.raises(NotAccepted):
                await h.send("hi")

    async def test_a_database_failure_refuses_it(self, tmp_path: Path) -> None:
        async with sqlite_db(tmp_path) as db, gateway(inbox=BrokenInbox(db)) as h:
            h.gateway.hand_over()
            with pytest.raises(NotAccepted):
                await h.send("hi", message_id="m-1")


class ClaimRecorder:
    """The cluster's side of a stored occurrence: which sessions were to be claimed."""

    def __init__(self) -> None:
        self.claims: list[str] = []

    async def hold(self, job: Job) -> bool:
        raise AssertionError("a scheduled occurrence is not kept as a received message")

    def kept(self, job: Job) -> None:
        raise AssertionError("a scheduled occurrence is not kept as a received message")

    def dispatch(self, job: Job) -> None:
        raise AssertionError("a scheduled occurrence is not dispatched as a received message")

    def went_idle(self, session_key: str) -> None:
        raise AssertionError("nothing runs here: the holder of the session claims it")

    def claim_soon(self, session_key: str) -> None:
        self.claims.append(session_key)

    async def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> None:
        raise AssertionError("not used here")


class TestEnqueue:
    """A turn nobody typed (a scheduled occurrence): stored once under its key, then run."""

    async def test_it_runs_here_and_its_key_is_taken_once(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            msg = message("remind me", message_id="cron-1")
            job = await h.gateway.enqueue(
                msg, agent_id="main", session_key=DM_KEY, dedupe_key="cron:j1:t1"
            )
            assert job is not None
            await settled(job.done)
            again = await h.gateway.enqueue(
                msg, agent_id="main", session_key=DM_KEY, dedupe_key="cron:j1:t1"
            )
            assert again is None  # another ticker fired the same occurrence
            assert h.agent.asked() == ["remind me"]

    async def test_with_several_processes_the_sessions_holder_runs_it(
        self, inbox: SqlInbox
    ) -> None:
        async with gateway(inbox=inbox) as h:
            work = ClaimRecorder()
            h.gateway.distribute(work)
            msg = message("remind me", message_id="cron-1")
            job = await h.gateway.enqueue(
                msg, agent_id="main", session_key=DM_KEY, dedupe_key="cron:j1:t1"
            )
            assert job is not None and job.inbox_id is not None
            entry = await inbox.get(job.inbox_id)
            assert entry is not None and entry.owner is None  # whoever claims the session
            assert entry.state is InboxState.QUEUED
            assert work.claims == [DM_KEY] and h.agent.requests == []

    async def test_nothing_fires_while_shutting_down(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.gateway.hand_over()
            with pytest.raises(NotAccepted):
                await h.gateway.enqueue(
                    message("late"), agent_id="main", session_key=DM_KEY, dedupe_key="cron:x"
                )
            assert await entries(inbox) == []


class FlakyInbox(SqlInbox):
    """Fails its first ``accept``, as a database blip would."""

    failed = False

    async def accept(self, msg: InboundMessage, **kw: Any) -> int | None:
        if not self.failed:
            self.failed = True
            raise OSError("database is down")
        return await super().accept(msg, **kw)


def announcement(origin: Any, task_id: str = "task-1", content: str = "42") -> Announcement:
    parent = RunRequest(
        session_key=DM_KEY,
        message="work on it in the background",
        user_id="web:alice",
        agent_id="main",
        origin=origin,
    )
    child = ChildRun(
        task_id=task_id,
        kind="spawn",
        agent_id="main",
        parent=parent,
        request=RunRequest(session_key=f"{DM_KEY}:child", message="work", user_id="web:alice"),
        root_session_key=DM_KEY,
        background=True,
    )
    return Announcement(
        child, RunResult(run_id="child", status=RunStatus.COMPLETED, content=content)
    )


class TestAnnounce:
    async def test_a_background_result_is_a_new_turn_in_the_origin_chat(
        self, inbox: SqlInbox
    ) -> None:
        async with gateway(inbox=inbox) as h:
            origin = message("work on it in the background", message_id="m-1")
            news = announcement(origin)
            h.agent.script("The task found 42.")
            await h.gateway.announce(news)
            await h.agent.wait_for(lambda: h.agent.requests)
            await h.channel.wait_for(lambda: h.channel.texts())
            assert h.agent.asked() == [news.text]
            request = h.agent.requests[0]
            assert request.session_key == DM_KEY
            assert request.origin.metadata.get("announcement") == "task-1"
            assert h.channel.texts() == ["The task found 42."]
            # No reaction on the origin message: there is no new user message to react on.
            # The session's next message runs once the announcement's turn has ended.
            await settled((await h.queued("next")).done)
            assert "m-1" not in {r.message_id for r in h.channel.records if "reaction" in r.kind}
            assert [(text, state) for text, state, _ in await entries(inbox)] == [
                (news.text, InboxState.ANSWERED),
                ("next", InboxState.ANSWERED),
            ]

    async def test_the_same_result_announced_twice_runs_once(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            news = announcement(message("in the background", message_id="m-1"))
            await h.gateway.announce(news)
            await h.gateway.announce(news)  # e.g. a retried hand-over of the same task
            await h.channel.wait_for(lambda: h.channel.texts())
            await settled((await h.queued("next")).done)
            assert h.agent.asked() == [news.text, "next"]
            assert len(await entries(inbox)) == 2

    async def test_no_reply_to_an_announcement_sends_nothing(self) -> None:
        async with gateway() as h:
            h.agent.script("NO_REPLY", "after")
            await h.gateway.announce(announcement(message("bg", message_id="m-1")))
            await h.agent.wait_for(lambda: h.agent.requests)
            # A later message of the session runs after it: the announcement's turn ended.
            job = await h.queued("next")
            await settled(job.done)
            assert h.channel.texts() == ["after"]

    async def test_an_origin_on_an_unknown_channel_is_not_announced(self) -> None:
        async with gateway() as h:
            elsewhere = message("bg", chat=ChatRef("telegram", "42"))
            await h.gateway.announce(announcement(elsewhere))
            await h.gateway.announce(announcement("not a message"))
            assert h.gateway.busy_sessions() == set() and h.agent.requests == []

    async def test_dropped_when_not_accepting(self) -> None:
        async with gateway() as h:
            h.gateway.stop_accepting()
            await h.gateway.announce(announcement(message("bg")))
            assert h.gateway.busy_sessions() == set() and h.agent.requests == []


class TestResubmit:
    async def test_a_saved_answer_is_delivered_without_a_new_run(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            msg = message("hi", message_id="m-1")
            entry_id = await inbox.add(msg, session_key=DM_KEY, agent_id="main")
            await inbox.save_answer(entry_id, "Saved before the crash.")
            entry = await inbox.get(entry_id)
            assert entry is not None
            job = h.gateway.resubmit(entry)
            assert job.replayed and job.inbox_id == entry_id
            await settled(job.done)
            assert h.agent.requests == []
            assert h.channel.texts() == ["Saved before the crash."]
            assert await entries(inbox) == [("hi", InboxState.ANSWERED, None)]

    async def test_an_unanswered_entry_is_run(self, inbox: SqlInbox) -> None:
        async with gateway(inbox=inbox) as h:
            h.agent.script("answered now")
            msg = message("left over", message_id="m-1")
            entry_id = await inbox.add(msg, session_key=DM_KEY, agent_id="main")
            entry = await inbox.get(entry_id)
            assert isinstance(entry, InboxEntry)
            job = h.gateway.resubmit(entry, replayed=False)
            assert not job.replayed
            await settled(job.done)
            assert h.agent.asked() == ["left over"]
            assert h.channel.texts() == ["answered now"]
            assert await entries(inbox) == [("left over", InboxState.ANSWERED, None)]
