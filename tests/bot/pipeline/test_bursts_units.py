"""``Bursts`` on its own (``test_bursts.py`` is end to end): debounce and the queue modes,
in front of a real ``Scheduler`` whose jobs are run by a fake turn the test controls."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agent_core import RunResult, RunStatus
from bot.config import BotConfig
from bot.pipeline import bursts as bursts_module
from bot.pipeline.bursts import Bursts
from bot.pipeline.job import Job
from bot.pipeline.reactions import ReactionCleanups, StatusReactions
from bot.pipeline.run_registry import ActiveRun, LocalRunRegistry
from bot.pipeline.scheduler import Scheduler
from bot.pipeline.session_keys import session_key
from channels import MEDIA_GROUP, Attachment, ChatRef, MessageRef
from tests.pipeline_support import DM, GROUP, RecordingChannel, message, settled
from tests.waiting import Changes


class Turns:
    """Runs jobs as ``TurnRunner`` would, as far as bursts can tell: registered in the run
    registry while running, settled with their result (the scheduler calls ``Bursts.ended``).
    A run waits until the test releases it (``release``) or is cancelled."""

    def __init__(self, **bot: Any) -> None:
        self.config = BotConfig.model_validate(bot)
        self.channel = RecordingChannel()
        self.registry = LocalRunRegistry()
        # Bursts own the scheduler; it runs ``run`` and hands each ended job back to them.
        self.bursts = Bursts(self.config, self.registry, self)
        self.scheduler: Scheduler[Job] = self.bursts.scheduler
        self.started: list[Job] = []
        self.drops: list[Job] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.changed = Changes()
        self.hold = False
        self.cleanups = ReactionCleanups()  # the earlier messages' last reactions (Bursts)

    def job(
        self, text: str, *, chat: ChatRef = DM, sender: str = "alice", inbox_id: int | None = None
    ) -> Job:
        msg = message(text, chat=chat, sender=sender, message_id=f"m-{text}")
        return Job(
            message=msg,
            agent_id="main",
            session_key=session_key("main", chat),
            concurrency=self.config.group_concurrency
            if chat is GROUP
            else self.config.dm_concurrency,
            run_id=uuid.uuid4().hex,
            reactions=StatusReactions(self.channel, MessageRef(chat, msg.message_id)),
            inbox_id=inbox_id,
        )

    def submit(self, *jobs: Job) -> None:
        for job in jobs:
            self.bursts.submit(job)

    def texts(self) -> list[str]:
        return [job.message.text for job in self.started]

    def release(self, text: str) -> None:
        self.gates.setdefault(text, asyncio.Event()).set()

    async def run(self, job: Job) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.registry.register(
            ActiveRun(job.run_id, job.agent_id, job.session_key, job.requester_id, task)
        )
        self.started.append(job)
        self.changed.notify()
        result = RunResult(job.run_id, RunStatus.COMPLETED, f"answer to {job.message.text}")
        try:
            if self.hold:
                await self.gates.setdefault(job.message.text, asyncio.Event()).wait()
        except asyncio.CancelledError:
            result = RunResult(job.run_id, RunStatus.CANCELLED)
        finally:
            self.registry.unregister(job.run_id)
            await job.reactions.finish(ok=True)
            job.settle(result)

    async def dropped(self, job: Job) -> None:
        self.drops.append(job)
        job.settle(None)
        self.changed.notify()

    async def wait_for(self, predicate: Any, timeout: float = 5) -> None:
        await self.changed.wait_for(predicate, timeout)


@asynccontextmanager
async def turns(**bot: Any) -> AsyncIterator[Turns]:
    t = Turns(**bot)
    try:
        yield t
    finally:
        await t.bursts.aclose()


class TestDebounce:
    async def test_a_burst_of_one_sender_is_one_turn(self) -> None:
        async with turns(debounce_ms=50) as t:
            jobs = [t.job(text, inbox_id=i) for i, text in enumerate(["one", "two", "three"], 1)]
            t.submit(*jobs)
            assert t.started == [] and t.bursts.sessions == {jobs[0].session_key}
            assert not t.bursts.starts_at_once(t.job("four"))  # it would wait for quiet
            results = await settled(*(job.done for job in jobs))
            assert t.texts() == ["one\n\ntwo\n\nthree"]
            (merged,) = t.started
            # The merged job is the last message with every text; it carries the earlier
            # messages' inbox entries.
            assert merged.message.message_id == "m-three"
            assert merged.inbox_id == 3 and merged.absorbed == [1, 2]
            assert results[0] is results[1] is results[2]
            assert results[2].content == "answer to one\n\ntwo\n\nthree"
            assert t.bursts.sessions == set()

    async def test_a_burst_keeps_every_photo_and_skips_empty_captions(self) -> None:
        async with turns(debounce_ms=50) as t:
            photos = [Attachment("image", f"f{i}", f"p{i}.jpg", "image/jpeg") for i in (1, 2)]
            first, second = t.job("look"), t.job("")
            first.message.attachments = (photos[0],)
            second.message.attachments = (photos[1],)
            t.submit(first, second)
            await settled(first.done, second.done)
            (merged,) = t.started
            assert merged.message.attachments == tuple(photos)
            assert merged.message.text == "look"  # no blank paragraph for the bare photo

    async def test_each_message_restarts_the_wait(self) -> None:
        async with turns(debounce_ms=600) as t:
            one = t.job("one")
            t.submit(one)
            loop = asyncio.get_running_loop()
            started_at = loop.time()
            # Keep the burst going: each message comes before the window of the last passed
            # (the sleeps are the input's rhythm, not a synchronisation).
            for text in ["two", "three"]:
                await asyncio.sleep(0.3)
                assert t.started == []
                t.submit(t.job(text))
            await settled(one.done)
            assert t.texts() == ["one\n\ntwo\n\nthree"]
            # Longer than one window: the last message restarted it.
            assert loop.time() - started_at >= 0.3 + 0.3 + 0.6 - 0.05

    async def test_in_a_group_each_sender_has_their_own_burst(self) -> None:
        async with turns(debounce_ms=50) as t:
            a1 = t.job("alice 1", chat=GROUP, sender="alice")
            b1 = t.job("bob 1", chat=GROUP, sender="bob")
            a2 = t.job("alice 2", chat=GROUP, sender="alice")
            t.submit(a1, b1, a2)
            await settled(a1.done, b1.done, a2.done)
            assert sorted(t.texts()) == ["alice 1\n\nalice 2", "bob 1"]
            alice = next(job for job in t.started if job.requester_id == "alice")
            assert alice.message.message_id == "m-alice 2"  # the reply quotes the last one

    async def test_zero_routes_at_once(self) -> None:
        async with turns() as t:
            job = t.job("one")
            assert t.bursts.starts_at_once(job)
            t.submit(job)
            # Handed to the scheduler before submit returned: no timer in between.
            assert t.scheduler.sessions == {job.session_key}
            assert t.bursts.sessions == set()
            await settled(job.done)
            assert t.texts() == ["one"]

    async def test_earlier_messages_reactions_end_with_the_turn(self) -> None:
        async with turns(debounce_ms=50) as t:
            jobs = [t.job("one"), t.job("two")]
            for job in jobs:
                await job.reactions.received()
            t.submit(*jobs)
            await settled(*(job.done for job in jobs))
            await t.cleanups.flushed(5)
            shown = {r.message_id for r in t.channel.records if r.kind == "reaction"}
            assert shown == {"m-one", "m-two"}
            assert t.channel.reactions_left() == {}

    async def test_an_earlier_messages_slow_cleanup_does_not_hold_the_session(self) -> None:
        async with turns(debounce_ms=50) as t:
            gate = asyncio.Event()
            removing = t.channel.remove_reaction

            async def slow_removal(ref: MessageRef, emoji: str) -> None:
                if ref.message_id == "m-one":
                    await gate.wait()
                await removing(ref, emoji)

            t.channel.remove_reaction = slow_removal  # type: ignore[method-assign]
            jobs = [t.job("one"), t.job("two")]
            for job in jobs:
                await job.reactions.received()
            t.submit(*jobs)
            await settled(*(job.done for job in jobs))
            await t.wait_for(lambda: t.scheduler.lanes == 0)  # the session is idle already
            assert t.channel.reactions_left() == {"m-one": ["👀"]}
            gate.set()
            assert await t.cleanups.flushed(5) == set()
            assert t.channel.reactions_left() == {}


class TestAlbums:
    """Telegram sends an album's pictures as separate messages sharing ``media_group_id``."""

    @staticmethod
    def part(t: Turns, text: str, group: str = "g1") -> Job:
        job = t.job(text)
        job.message.metadata[MEDIA_GROUP] = group
        job.message.attachments = (Attachment("image", f"f-{text}", f"{text}.jpg", "image/jpeg"),)
        return job

    async def test_an_album_waits_and_is_one_turn_without_debounce(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(bursts_module, "ALBUM_WAIT", 0.05)
        async with turns() as t:  # bot.debounce_ms 0: plain messages go at once
            parts = [self.part(t, "caption"), self.part(t, ""), self.part(t, "")]
            assert not t.bursts.starts_at_once(parts[0])
            t.submit(*parts)
            assert t.started == [] and t.bursts.sessions == {parts[0].session_key}
            # A message while the album waits joins it (it would otherwise overtake it).
            late = t.job("and this one?")
            assert not t.bursts.starts_at_once(late)
            t.submit(late)
            await settled(*(job.done for job in [*parts, late]))
            (merged,) = t.started
            assert merged.message.text == "caption\n\nand this one?"
            assert [a.name for a in merged.message.attachments] == [
                "caption.jpg",
                ".jpg",
                ".jpg",
            ]

    async def test_two_albums_one_after_the_other_are_two_turns(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(bursts_module, "ALBUM_WAIT", 0.05)
        async with turns() as t:
            first = self.part(t, "first", "a")
            t.submit(first)
            await settled(first.done)
            second = self.part(t, "second", "b")
            t.submit(second)
            await settled(second.done)
            assert t.texts() == ["first", "second"]


class TestDropHeld:
    async def test_a_burst_waiting_for_its_window_is_dropped(self) -> None:
        async with turns(debounce_ms=60_000) as t:
            alice, bob = t.job("alice", chat=GROUP), t.job("bob", chat=GROUP, sender="bob")
            t.submit(alice, bob)
            dropped = t.bursts.drop_held(
                alice.session_key, lambda job: job.requester_id == "alice", "stopped by /stop"
            )
            assert dropped == [alice]
            assert await settled(alice.done) == [None]
            await t.wait_for(lambda: t.drops)
            assert t.drops == [alice] and alice.drop_reason == "stopped by /stop"
            assert not bob.done.done() and t.bursts.sessions == {bob.session_key}
            assert t.bursts.drop_held(bob.session_key, lambda job: True, "stopped") == [bob]
            assert t.bursts.sessions == set() and t.started == []

    async def test_other_sessions_are_untouched(self) -> None:
        async with turns(debounce_ms=60_000) as t:
            job = t.job("one")
            t.submit(job)
            assert t.bursts.drop_held("agent:main:web:direct:other", lambda j: True, "x") == []
            assert t.bursts.sessions == {job.session_key}

    async def test_aclose_settles_what_waits_without_running_it(self) -> None:
        async with turns(debounce_ms=60_000) as t:
            job = t.job("one")
            t.submit(job)
            await t.bursts.aclose()
            assert await settled(job.done) == [None]
            assert t.started == [] and t.drops == []


async def two_behind_a_run(t: Turns) -> list[Job]:
    """ "one" runs (held), then "two" and "three" arrive for the same session."""
    t.hold = True
    jobs = [t.job("one"), t.job("two"), t.job("three")]
    t.submit(jobs[0])
    await t.wait_for(lambda: t.started)
    assert not t.bursts.starts_at_once(jobs[1])
    t.submit(*jobs[1:])
    return jobs


class TestQueueModes:
    async def test_followup_runs_each_queued_message_on_its_own(self) -> None:
        async with turns(queue_mode="followup") as t:
            jobs = await two_behind_a_run(t)
            for text in ["one", "two", "three"]:
                t.release(text)
            results = await settled(*(job.done for job in jobs))
            assert t.texts() == ["one", "two", "three"]
            assert [r.content for r in results] == [
                "answer to one",
                "answer to two",
                "answer to three",
            ]

    async def test_collect_makes_what_queued_one_turn(self) -> None:
        async with turns() as t:
            assert t.config.queue_mode == "collect"
            jobs = await two_behind_a_run(t)
            assert len(t.scheduler.queued(jobs[0].session_key)) == 1
            t.release("one")
            t.release("two\n\nthree")
            first, second, third = await settled(*(job.done for job in jobs))
            assert t.texts() == ["one", "two\n\nthree"]
            assert first.content == "answer to one"
            assert second is third and third.content == "answer to two\n\nthree"

    async def test_collect_never_merges_senders_in_a_group(self) -> None:
        async with turns(group_concurrency=1) as t:
            t.hold = True
            first = t.job("alice 1", chat=GROUP)
            t.submit(first)
            await t.wait_for(lambda: t.started)
            later = [
                t.job("bob 1", chat=GROUP, sender="bob"),
                t.job("alice 2", chat=GROUP),
                t.job("alice 3", chat=GROUP),
            ]
            t.submit(*later)
            for text in ["alice 1", "bob 1", "alice 2\n\nalice 3"]:
                t.release(text)
            await settled(first.done, *(job.done for job in later))
            assert t.texts() == ["alice 1", "bob 1", "alice 2\n\nalice 3"]

    async def test_interrupt_cancels_the_run_and_answers_everything_together(self) -> None:
        async with turns(queue_mode="interrupt") as t:
            t.hold = True
            one, two = t.job("one", inbox_id=1), t.job("two", inbox_id=2)
            t.submit(one)
            await t.wait_for(lambda: t.started)
            assert not t.bursts.starts_at_once(two)
            t.submit(two)
            (cancelled,) = await settled(one.done)
            assert cancelled.status is RunStatus.CANCELLED and one.interrupted
            await t.wait_for(lambda: len(t.started) == 2)
            t.release("one\n\ntwo")
            (answered,) = await settled(two.done)
            assert t.texts() == ["one", "one\n\ntwo"]
            assert answered.content == "answer to one\n\ntwo"
            assert t.started[1].absorbed == [1] and t.started[1].inbox_id == 2

    async def test_interrupt_leaves_other_senders_runs_alone(self) -> None:
        async with turns(queue_mode="interrupt") as t:
            t.hold = True
            alice = t.job("alice 1", chat=GROUP)
            t.submit(alice)
            await t.wait_for(lambda: t.started)
            bob = t.job("bob 1", chat=GROUP, sender="bob")
            t.submit(bob)  # the group has room: it runs beside alice's
            await t.wait_for(lambda: len(t.started) == 2)
            t.release("bob 1")
            await settled(bob.done)
            assert not alice.done.done() and not alice.interrupted
            t.release("alice 1")
            (result,) = await settled(alice.done)
            assert result.status is RunStatus.COMPLETED

    async def test_stopall_while_interrupted_drops_the_newer_messages(self) -> None:
        async with turns(queue_mode="interrupt") as t:
            t.hold = True
            one, two = t.job("one"), t.job("two")
            t.submit(one)
            await t.wait_for(lambda: t.started)
            # The interrupted run's cancel is requested; it has not ended yet.
            t.submit(two)
            dropped = t.bursts.drop_held(two.session_key, lambda job: True, "stopped by /stopall")
            assert dropped == [two]
            await settled(one.done, two.done)
            await t.wait_for(lambda: t.drops)
            assert t.texts() == ["one"]  # nothing answered after all
            assert t.bursts.sessions == set()
