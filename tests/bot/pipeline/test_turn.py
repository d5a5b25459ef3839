"""``TurnRunner.execute`` on its own: one job, a scripted agent, a recording channel and the
real inbox on a temporary SQLite database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core import Event, EventBus, EventType, RunResult, RunStatus
from bot.config import BotConfig
from bot.pipeline.chunking import render_chunks
from bot.pipeline.job import Job
from bot.pipeline.reactions import StatusReactions
from bot.pipeline.run_registry import LocalRunRegistry
from bot.pipeline.session_keys import session_key
from bot.pipeline.turn import TurnRunner
from bot.storage.inbox import InboxState, SqlInbox
from channels import Capabilities, ChatRef, Forbidden, MessageRef
from tests.pipeline_support import (
    DM,
    GROUP,
    FakeAgent,
    Hold,
    RecordingChannel,
    failed,
    message,
    sqlite_db,
    sqlite_inbox,
)

LONG = "\n\n".join(f"Paragraph {i}: " + "word " * 50 for i in range(6))


class Turn:
    """A TurnRunner with its collaborators, and a way to make jobs for it."""

    def __init__(self, inbox: SqlInbox | None, **bot: object) -> None:
        self.config = BotConfig.model_validate({"typing_interval": 0.01, **bot})
        self.channel = RecordingChannel(capabilities=Capabilities(max_chars=300))
        self.agent = FakeAgent()
        self.registry = LocalRunRegistry()
        self.events = EventBus()
        self.inbox = inbox
        self.runner = TurnRunner(
            config=self.config,
            router=self.agent,  # type: ignore[arg-type]
            registry=self.registry,
            events=self.events,
            inbox=inbox,
        )

    async def job(
        self,
        text: str = "hi",
        *,
        chat: ChatRef = DM,
        stored: bool = True,
        debounce: float = 0.0,
        **fields: object,
    ) -> Job:
        msg = message(text, chat=chat, message_id="m-1")
        key = session_key("main", chat)
        job = Job(
            message=msg,
            agent_id="main",
            session_key=key,
            concurrency=1,
            run_id=uuid.uuid4().hex,
            reactions=StatusReactions(
                self.channel,
                MessageRef(chat, msg.message_id),
                cleanup=self.config.reaction_cleanup,
                debounce=debounce,
            ),
            **fields,  # type: ignore[arg-type]
        )
        if stored and self.inbox is not None:
            job.inbox_id = await self.inbox.add(msg, session_key=key, agent_id="main")
        return job

    async def execute(self, job: Job) -> RunResult | None:
        await asyncio.wait_for(self.runner.execute(job, self.channel), 5)
        assert job.done.done()
        await self.runner.cleanups.flushed(5)  # the turn's last reaction follows it
        return job.done.result()

    async def entry(self, job: Job) -> tuple[InboxState, str | None, str | None, list[str]]:
        assert self.inbox is not None and job.inbox_id is not None
        entry = await self.inbox.get(job.inbox_id)
        assert entry is not None
        return entry.state, entry.reason, entry.answer, entry.parts


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[SqlInbox]:
    async with sqlite_inbox(tmp_path) as box:
        yield box


class TestAnswer:
    async def test_the_answer_is_delivered_and_the_entry_answered(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.agent.script("Hello Alice!")
        job = await turn.job("hi")
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.COMPLETED
        assert turn.channel.texts() == ["Hello Alice!"]
        assert turn.channel.messages()[0].reply_to is None  # a DM quotes nothing
        request = turn.agent.requests[0]
        assert (request.message, request.session_key, request.run_id) == (
            "hi",
            job.session_key,
            job.run_id,
        )
        assert (request.user_id, request.chat_id, request.origin) == (
            "web:alice",
            "web:dm-alice",
            job.message,
        )
        sent_id = turn.channel.messages()[0].message_id
        assert await turn.entry(job) == (InboxState.ANSWERED, None, "Hello Alice!", [sent_id])
        assert turn.registry.active_runs == 0
        assert job.outcome == (InboxState.ANSWERED, None)

    async def test_without_an_inbox_the_answer_still_goes_out(self) -> None:
        turn = Turn(None)
        turn.agent.script("Hello!")
        result = await turn.execute(await turn.job())
        assert result is not None and result.content == "Hello!"
        assert turn.channel.texts() == ["Hello!"]

    async def test_a_group_answer_quotes_the_message(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        await turn.execute(await turn.job(chat=GROUP))
        assert [(r.text, r.reply_to) for r in turn.channel.messages()] == [("ok", "m-1")]

    async def test_a_long_answer_is_saved_before_its_chunks_and_all_are_recorded(
        self, inbox: SqlInbox
    ) -> None:
        turn = Turn(inbox)
        turn.agent.script(LONG)
        job = await turn.job()
        await turn.execute(job)
        chunks = render_chunks(LONG, "markdown", 300)
        assert turn.channel.texts() == chunks
        ids = [r.message_id for r in turn.channel.messages()]
        assert await turn.entry(job) == (InboxState.ANSWERED, None, LONG, ids)

    async def test_no_reply_sends_nothing(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.agent.script("NO_REPLY")
        job = await turn.job()
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.COMPLETED
        assert turn.channel.messages() == []
        state, reason, _, parts = await turn.entry(job)
        assert (state, reason, parts) == (InboxState.ANSWERED, "NO_REPLY", [])

    async def test_the_entry_is_marked_running_while_the_agent_works(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        hold = Hold("done")
        turn.agent.script(hold)
        job = await turn.job()
        assert (await turn.entry(job))[0] is InboxState.QUEUED
        task = asyncio.create_task(turn.execute(job))
        await turn.agent.wait_for(lambda: turn.agent.requests)
        assert (await turn.entry(job))[0] is InboxState.RUNNING
        assert [run.run_id for run in turn.registry.runs_of(job.session_key)] == [job.run_id]
        hold.release.set()
        await task
        assert (await turn.entry(job))[0] is InboxState.ANSWERED

    async def test_an_entry_another_process_holds_is_not_run(self, tmp_path: Path) -> None:
        async with sqlite_db(tmp_path) as db:
            other, mine = SqlInbox(db, owner="other"), SqlInbox(db, owner="me")
            turn = Turn(mine)
            job = await turn.job(stored=False)
            # Stored (and leased) by the other process.
            job.inbox_id = await other.add(
                job.message, session_key=job.session_key, agent_id="main"
            )
            assert await turn.execute(job) is None
            assert turn.agent.requests == [] and turn.channel.records == []
            entry = await other.get(job.inbox_id)
            assert entry is not None and entry.state is InboxState.QUEUED


class TestSavedAnswer:
    async def test_a_saved_answer_is_delivered_without_a_new_run(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        job = await turn.job(answer="Saved answer.", replayed=True)
        result = await turn.execute(job)
        assert turn.agent.requests == []
        assert result is not None and result.content == "Saved answer."
        assert turn.channel.texts() == ["Saved answer."]
        state, _, _, parts = await turn.entry(job)
        assert state is InboxState.ANSWERED
        assert parts == [turn.channel.messages()[0].message_id]

    async def test_delivery_resumes_after_the_chunks_already_sent(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        chunks = render_chunks(LONG, "markdown", 300)
        job = await turn.job(answer=LONG, parts=["p-1", "p-2"], replayed=True)
        assert job.inbox_id is not None
        await inbox.save_answer(job.inbox_id, LONG)
        await turn.execute(job)
        assert turn.agent.requests == []
        assert turn.channel.texts() == chunks[2:]  # the first two went out before the crash
        state, _, _, parts = await turn.entry(job)
        assert state is InboxState.ANSWERED
        assert parts == ["p-1", "p-2", *(r.message_id for r in turn.channel.messages())]


class TestFailure:
    async def test_a_failed_run_gets_the_apology_and_the_entry_fails(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.agent.script(failed("model down"))
        job = await turn.job()
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.FAILED
        assert turn.channel.texts() == [turn.config.error_reply]
        state, reason, _, _ = await turn.entry(job)
        assert (state, reason) == (InboxState.FAILED, "run: model down")

    async def test_an_agent_that_crashes_gets_the_apology_and_names_the_run(
        self, inbox: SqlInbox
    ) -> None:
        turn = Turn(inbox)
        turn.agent.script(RuntimeError("bug in a tool"))
        job = await turn.job()
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.FAILED
        assert turn.channel.texts() == [turn.config.error_reply]
        state, reason, _, _ = await turn.entry(job)
        assert (state, reason) == (InboxState.FAILED, "run: RuntimeError: bug in a tool")

    async def test_silent_errors_send_nothing(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox, silent_errors=True)
        turn.agent.script(failed())
        job = await turn.job()
        await turn.execute(job)
        assert turn.channel.messages() == []
        assert (await turn.entry(job))[0] is InboxState.FAILED

    async def test_an_unknown_agent_gets_its_own_reply(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.agent.unknown.add("main")
        job = await turn.job()
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.FAILED
        assert turn.channel.texts() == [turn.config.unknown_agent_reply]
        assert (await turn.entry(job))[:2] == (InboxState.FAILED, "run: unknown_agent")

    async def test_a_delivery_failure_ends_the_entry_failed_without_raising(
        self, inbox: SqlInbox
    ) -> None:
        turn = Turn(inbox)
        turn.channel.failures.append(Forbidden("bot was blocked"))
        job = await turn.job()
        result = await turn.execute(job)
        assert result is not None and result.status is RunStatus.FAILED
        state, reason, _, _ = await turn.entry(job)
        assert state is InboxState.FAILED
        assert reason is not None and reason.startswith("delivery: Forbidden: bot was blocked")
        assert turn.registry.active_runs == 0

    async def test_failure_shows_the_error_reaction_in_final_mode(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox, reaction_cleanup="final")
        turn.agent.script(failed())
        await turn.execute(await turn.job())
        assert turn.channel.reactions_left() == {"m-1": ["😢"]}

    async def test_success_shows_the_done_reaction_in_final_mode(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox, reaction_cleanup="final")
        await turn.execute(await turn.job())
        assert turn.channel.reactions_left() == {"m-1": ["👍"]}


class TestCancel:
    async def running(self, turn: Turn, hold: Hold) -> tuple[Job, asyncio.Task[None]]:
        turn.agent.script(hold)
        job = await turn.job()
        task = asyncio.create_task(turn.runner.execute(job, turn.channel))
        await turn.agent.wait_for(lambda: turn.agent.requests)
        return job, task

    async def test_stop_cancels_the_run_sends_nothing_and_drops_the_entry(
        self, inbox: SqlInbox
    ) -> None:
        turn = Turn(inbox)
        hold = Hold()
        job, task = await self.running(turn, hold)
        assert turn.registry.abort(job.run_id, job.session_key)  # what /stop does
        await asyncio.wait_for(task, 5)  # the turn absorbs the cancel: it ended, it is done
        assert hold.cancelled
        result = job.done.result()
        assert result is not None and result.status is RunStatus.CANCELLED
        assert turn.channel.messages() == []
        assert (await turn.entry(job))[:2] == (InboxState.DROPPED, "stopped")
        assert turn.registry.active_runs == 0
        assert "typing" in turn.channel.kinds()
        assert typing_tasks() == []  # no refresh comes later

    async def test_a_shutdown_gives_the_entry_back(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        job, task = await self.running(turn, Hold())
        turn.runner.shutting_down = True
        task.cancel()
        await asyncio.wait_for(task, 5)
        assert turn.channel.messages() == []
        state, reason, _, _ = await turn.entry(job)
        assert (state, reason) == (InboxState.QUEUED, "interrupted by shutdown")

    async def test_unknown_session_cannot_abort_the_run(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        hold = Hold("finished")
        job, task = await self.running(turn, hold)
        assert not turn.registry.abort(job.run_id, "agent:main:web:direct:someone-else")
        hold.release.set()
        await asyncio.wait_for(task, 5)
        assert turn.channel.texts() == ["finished"]


class TestTypingAndReactions:
    async def test_typing_runs_during_the_run_and_stops_before_the_answer(
        self, inbox: SqlInbox
    ) -> None:
        turn = Turn(inbox)
        hold = Hold("answer")
        turn.agent.script(hold)
        job = await turn.job()
        task = asyncio.create_task(turn.execute(job))
        # Refreshed every typing_interval while the agent works.
        await turn.channel.wait_for(lambda: turn.channel.kinds().count("typing") >= 3)
        hold.release.set()
        await task
        kinds = turn.channel.kinds()
        assert "typing" not in kinds[kinds.index("message") :]
        assert typing_tasks() == []

    async def test_typing_is_not_sent_where_the_channel_has_none(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.channel.capabilities = Capabilities(max_chars=300, typing=False)
        await turn.execute(await turn.job())
        assert "typing" not in turn.channel.kinds()

    async def test_receipt_then_progress_then_cleared(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        hold = Hold("answer")
        turn.agent.script(hold)
        job = await turn.job(debounce=0.0)
        job.reactions.received_soon()  # what the gateway does on acceptance
        task = asyncio.create_task(turn.execute(job))
        await turn.agent.wait_for(lambda: turn.agent.requests)
        await turn.events.publish(
            Event(EventType.ACTIVITY, job.run_id, job.session_key, {"phase": "tool_exec"})
        )
        await turn.channel.wait_for(lambda: turn.channel.reactions_left() == {"m-1": ["👨‍💻"]})
        # Another run's events in the same session don't touch this message.
        await turn.events.publish(
            Event(EventType.ACTIVITY, "another-run", job.session_key, {"phase": "thinking"})
        )
        hold.release.set()
        await task
        reactions = [(r.kind, r.text) for r in turn.channel.records if "reaction" in r.kind]
        assert reactions == [
            ("reaction", "👀"),
            ("reaction_removed", "👀"),
            ("reaction", "👨‍💻"),
            ("reaction_removed", "👨‍💻"),
        ]
        assert turn.channel.reactions_left() == {}
        # The receipt went on before the answer.
        kinds = turn.channel.kinds()
        assert kinds.index("reaction") < kinds.index("message")

    async def test_reactions_are_cleared_when_the_run_is_stopped(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.agent.script(Hold())
        job = await turn.job()
        job.reactions.received_soon()
        task = asyncio.create_task(turn.runner.execute(job, turn.channel))
        await turn.agent.wait_for(lambda: turn.agent.requests)
        turn.registry.abort(job.run_id, job.session_key)
        await asyncio.wait_for(task, 5)
        await turn.runner.cleanups.flushed(5)
        assert turn.channel.reactions_left() == {}
        assert ("reaction", "👀") in [(r.kind, r.text) for r in turn.channel.records]

    async def test_the_turn_ends_before_its_last_reaction_is_sent(self, inbox: SqlInbox) -> None:
        # The cleanup is cosmetic and costs a platform round trip: the turn, and with it the
        # session (in a cluster its lease), is free once the answer is recorded.
        turn = Turn(inbox)
        gate = asyncio.Event()
        removing = turn.channel.remove_reaction

        async def slow_removal(message: MessageRef, emoji: str) -> None:
            await gate.wait()
            await removing(message, emoji)

        turn.channel.remove_reaction = slow_removal  # type: ignore[method-assign]
        turn.agent.script("answer")
        job = await turn.job()
        job.reactions.received_soon()
        await asyncio.wait_for(turn.runner.execute(job, turn.channel), 5)
        assert job.done.result().status is RunStatus.COMPLETED
        assert turn.channel.texts() == ["answer"]
        assert (await turn.entry(job))[0] is InboxState.ANSWERED
        assert turn.channel.reactions_left() == {"m-1": ["👀"]}  # its removal still waits
        assert turn.runner.cleanups.pending == 1
        gate.set()
        assert await turn.runner.cleanups.flushed(5) == set()
        assert turn.channel.reactions_left() == {}


def typing_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("typing:") and not t.done()]


class DeletingChannel(RecordingChannel):
    """Records deletions, with how many messages had been sent before each."""

    def __init__(self) -> None:
        super().__init__(capabilities=Capabilities(max_chars=300))
        self.deletions: list[tuple[str, int]] = []

    async def edit_text(self, message: MessageRef, text: str) -> None:
        raise AssertionError("nothing is edited here")

    async def delete_message(self, message: MessageRef) -> bool:
        self.deletions.append((message.message_id, len(self.texts())))
        return message.message_id != "gone-already"


class TestStalePreviews:
    """Issue 27: a killed process's half-streamed preview must not stay next to the answer."""

    async def test_they_are_deleted_before_the_answer_and_forgotten(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)
        turn.channel = DeletingChannel()
        turn.agent.script("the whole answer")
        job = await turn.job("hi", replayed=True)
        assert job.inbox_id is not None
        await inbox.set_previews(job.inbox_id, ["p-1", "gone-already"])
        entry = await inbox.get(job.inbox_id)
        assert entry is not None and entry.previews == ["p-1", "gone-already"]
        job.previews = list(entry.previews)
        await turn.execute(job)
        assert turn.channel.deletions == [("p-1", 0), ("gone-already", 0)]
        assert turn.channel.texts() == ["the whole answer"]
        entry = await inbox.get(job.inbox_id)
        assert entry is not None and entry.previews == [] and entry.state is InboxState.ANSWERED

    async def test_a_channel_that_cannot_delete_still_answers(self, inbox: SqlInbox) -> None:
        turn = Turn(inbox)  # RecordingChannel: no delete_message
        turn.agent.script("answer")
        job = await turn.job("hi", previews=["p-1"])
        await turn.execute(job)
        assert turn.channel.texts() == ["answer"]
        assert job.previews == []
