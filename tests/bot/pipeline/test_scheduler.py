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
