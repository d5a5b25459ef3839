"""Typing keep-alive, status reactions and the per-session scheduler, against the local channel."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bot.pipeline.reactions import ReactionState, StatusReactions
from bot.pipeline.scheduler import Scheduler
from bot.pipeline.typing_indicator import TypingIndicator
from channels import Capabilities, ChatRef, MessageRef
from channels.local import LocalChannel, Outbound
from tests.waiting import wait_until

CHAT = ChatRef("web", "c1")


def recording_channel(**caps: object) -> tuple[LocalChannel, list[Outbound]]:
    channel = LocalChannel(capabilities=Capabilities(**caps))  # type: ignore[arg-type]
    records: list[Outbound] = []

    async def record(o: Outbound) -> None:
        records.append(o)

    channel.listen(CHAT.chat_id, record)
    return channel, records


class TestTyping:
    async def test_sent_at_once_refreshed_and_stopped(self) -> None:
        channel, records = recording_channel()
        typing = TypingIndicator(channel, CHAT, interval=0.02, ttl=10)
        typing.start()
        await wait_until(lambda: len(records) >= 3)
        await typing.stop()
        count = len(records)
        assert all(r.kind == "typing" for r in records)
        await asyncio.sleep(0.05)  # kept (negative check)
        assert len(records) == count  # nothing after stop
        typing.start()  # never restarted after stop
        await asyncio.sleep(0.03)  # kept (negative check)
        assert len(records) == count and not typing.active

    async def test_ttl_ends_the_refresh(self) -> None:
        channel, records = recording_channel()
        typing = TypingIndicator(channel, CHAT, interval=0.01, ttl=0.035)
        typing.start()
        await wait_until(lambda: not typing.active)
        count = len(records)
        assert 1 <= count <= 5  # once at start, then a few refreshes within the TTL
        await asyncio.sleep(0.05)  # kept (negative check): no refresh after the TTL
        assert len(records) == count
        await typing.stop()

    async def test_channel_without_typing_sends_nothing(self) -> None:
        channel, records = recording_channel(typing=False)
        typing = TypingIndicator(channel, CHAT, interval=0.01)
        typing.start()
        await asyncio.sleep(0.03)  # kept (negative check): a few intervals, no typing sent
        await typing.stop()
        assert records == []

    async def test_failure_of_typing_does_not_stop_refresh(self) -> None:
        calls = 0

        class Flaky(LocalChannel):
            async def set_typing(self, chat: ChatRef) -> None:
                nonlocal calls
                calls += 1
                raise RuntimeError("platform down")

        typing = TypingIndicator(Flaky(), CHAT, interval=0.01, ttl=5)
        typing.start()
        await wait_until(lambda: calls >= 2)
        assert typing.active
        await typing.stop()


class TestReactions:
    async def test_received_progress_then_cleared(self) -> None:
        channel, records = recording_channel()
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"), debounce=0.01)
        await reactions.received()
        reactions.progress(ReactionState.THINKING)
        reactions.progress(ReactionState.TOOL)  # debounced: only the latest shows
        await wait_until(lambda: any(r.text == "👨‍💻" for r in records))
        await reactions.finish(ok=True)
        seen = [(r.kind, r.text) for r in records]
        assert seen == [
            ("reaction", "👀"),
            ("reaction_removed", "👀"),
            ("reaction", "👨‍💻"),
            ("reaction_removed", "👨‍💻"),
        ]

    async def test_final_mode_leaves_terminal_state_even_when_pending(self) -> None:
        channel, records = recording_channel()
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"), cleanup="final", debounce=1)
        await reactions.received()
        reactions.progress(ReactionState.THINKING)  # still pending when the run ends
        await reactions.finish(ok=False)
        await wait_until(lambda: len(records) >= 3)
        assert [(r.kind, r.text) for r in records] == [
            ("reaction", "👀"),
            ("reaction_removed", "👀"),
            ("reaction", "😢"),
        ]

    async def test_channel_without_reactions_is_skipped(self) -> None:
        channel, records = recording_channel(reactions=False)
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"))
        await reactions.received()
        await reactions.finish(ok=True)
        assert records == []


@dataclass(eq=False)
class FakeJob:
    session_key: str
    name: str
    concurrency: int = 1
    gate: asyncio.Event = field(default_factory=asyncio.Event)


class TestScheduler:
    async def test_dm_runs_one_at_a_time_in_order(self) -> None:
        order: list[str] = []

        async def execute(job: FakeJob) -> None:
            order.append(f"start {job.name}")
            await job.gate.wait()
            order.append(f"end {job.name}")

        s: Scheduler[FakeJob] = Scheduler(execute)
        a, b = FakeJob("k", "a"), FakeJob("k", "b")
        s.submit(a)
        s.submit(b)
        await wait_until(lambda: order)
        await asyncio.sleep(0.01)  # kept (negative check): b does not start alongside a
        assert order == ["start a"]
        a.gate.set()
        b.gate.set()
        await wait_until(lambda: len(order) >= 4)
        assert order == ["start a", "end a", "start b", "end b"]
        assert s.lanes == 0

    async def test_group_runs_up_to_its_limit(self) -> None:
        started: list[str] = []

        async def execute(job: FakeJob) -> None:
            started.append(job.name)
            await job.gate.wait()

        s: Scheduler[FakeJob] = Scheduler(execute)
        jobs = [FakeJob("g", str(i), concurrency=3) for i in range(5)]
        for job in jobs:
            s.submit(job)
        await wait_until(lambda: len(started) >= 3)
        await asyncio.sleep(0.01)  # kept (negative check): no fourth one starts
        assert started == ["0", "1", "2"]
        jobs[0].gate.set()
        await wait_until(lambda: len(started) >= 4)
        assert started == ["0", "1", "2", "3"]
        await s.aclose()

    async def test_full_queue_drops_the_oldest(self) -> None:
        dropped: list[str] = []

        async def execute(job: FakeJob) -> None:
            await job.gate.wait()

        async def on_drop(job: FakeJob) -> None:
            dropped.append(job.name)

        s: Scheduler[FakeJob] = Scheduler(execute, queue_cap=2, on_drop=on_drop)
        for name in "abcd":
            s.submit(FakeJob("k", name))  # a runs; b, c queued; d pushes out b
        await wait_until(lambda: dropped)
        assert dropped == ["b"]
        assert [j.name for j in s.queued("k")] == ["c", "d"]
        await s.aclose()

    async def test_sessions_are_independent(self) -> None:
        started: list[str] = []

        async def execute(job: FakeJob) -> None:
            started.append(job.name)
            await job.gate.wait()

        s: Scheduler[FakeJob] = Scheduler(execute)
        s.submit(FakeJob("k1", "a"))
        s.submit(FakeJob("k2", "b"))
        await wait_until(lambda: len(started) >= 2)
        assert sorted(started) == ["a", "b"]
        await s.aclose()
