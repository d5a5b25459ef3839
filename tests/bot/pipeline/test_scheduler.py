"""The per-session scheduler (``scheduler.py``): lanes, concurrency, the queue cap."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bot.pipeline.scheduler import Scheduler
from tests.waiting import wait_until


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


class TestMaxRunning:
    """``max_running`` (``bot.max_concurrent_runs``): runs at once over all sessions."""

    @staticmethod
    def scheduler(started: list[str], max_running: int) -> Scheduler[FakeJob]:
        async def execute(job: FakeJob) -> None:
            started.append(job.name)
            await job.gate.wait()

        return Scheduler(execute, max_running=max_running)

    async def test_no_more_than_the_limit_run_and_the_next_starts_when_one_ends(self) -> None:
        started: list[str] = []
        s = self.scheduler(started, max_running=2)
        jobs = [FakeJob(f"chat{i}", f"chat{i}") for i in range(4)]
        for job in jobs:
            s.submit(job)
        await wait_until(lambda: len(started) >= 2)
        await asyncio.sleep(0.01)  # kept (negative check): the other two wait
        assert started == ["chat0", "chat1"]
        assert s.waiting_for_slot == 2  # /metrics: loopgate_sessions_waiting_for_run_slot
        assert not s.starts_at_once("chat9", 1)  # a new chat would wait too
        jobs[1].gate.set()
        await wait_until(lambda: len(started) >= 3)
        await asyncio.sleep(0.01)  # kept (negative check): one slot freed, one start
        assert started == ["chat0", "chat1", "chat2"]
        for job in jobs:
            job.gate.set()
        await wait_until(lambda: len(started) == 4 and s.lanes == 0)
        assert s.starts_at_once("chat9", 1) and s.waiting_for_slot == 0

    async def test_a_busy_chat_waits_behind_the_chats_that_waited_first(self) -> None:
        started: list[str] = []
        s = self.scheduler(started, max_running=1)
        a1, a2, a3 = FakeJob("a", "a1"), FakeJob("a", "a2"), FakeJob("a", "a3")
        b1, c1 = FakeJob("b", "b1"), FakeJob("c", "c1")
        for job in (a1, a2, b1, a3, c1):
            s.submit(job)
        for job in (a1, b1, c1, a2, a3):
            await wait_until(lambda job=job: job.name in started)  # type: ignore[misc]
            job.gate.set()
        # b and c waited for the slot before a's next job could start: without the waiting
        # order, a's own queue would go on first (a1, a2, a3, b1, c1).
        assert started == ["a1", "b1", "c1", "a2", "a3"]

    async def test_a_waiting_chat_whose_jobs_are_dropped_holds_up_nobody(self) -> None:
        started: list[str] = []
        s = self.scheduler(started, max_running=1)
        a, b, c = FakeJob("a", "a"), FakeJob("b", "b"), FakeJob("c", "c")
        for job in (a, b, c):
            s.submit(job)
        await wait_until(lambda: started == ["a"])
        assert [job.name for job in s.drop_queued("b", lambda job: True)] == ["b"]
        a.gate.set()
        await wait_until(lambda: started == ["a", "c"])
        c.gate.set()
        await wait_until(lambda: s.lanes == 0)

    async def test_a_held_scheduler_starts_nothing_when_a_slot_frees(self) -> None:
        started: list[str] = []
        s = self.scheduler(started, max_running=1)
        a, b = FakeJob("a", "a"), FakeJob("b", "b")
        s.submit(a)
        s.submit(b)
        await wait_until(lambda: started == ["a"])
        s.hold()
        a.gate.set()
        assert await s.wait_running(5) == 0
        await asyncio.sleep(0.01)  # kept (negative check): b stays queued
        assert started == ["a"] and [job.name for job in s.queued("b")] == ["b"]
        await s.aclose()
