"""bot/maintenance.py: periodic housekeeping: first run, interval, failures that do not end the
loop, and cancellation that does."""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress

import pytest
from structlog.testing import capture_logs

from bot.maintenance import run_periodically
from tests.waiting import wait_until


class Job:
    """Records when it ran; ``failures`` are raised by the next runs, one each."""

    def __init__(self, *failures: BaseException | None) -> None:
        self.times: list[float] = []
        self.failures = list(failures)

    async def __call__(self) -> str:
        self.times.append(time.monotonic())
        if self.failures and (failure := self.failures.pop(0)) is not None:
            raise failure
        return f"pruned {len(self.times)}"


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


async def test_runs_at_once_then_every_interval() -> None:
    job = Job()
    started = time.monotonic()
    task = asyncio.create_task(run_periodically("prune", job, every=0.05))
    try:
        await wait_until(lambda: len(job.times) >= 3, 5)
    finally:
        await stop(task)
    # Measures the loop's own sleeps: the first run does not wait, the next ones do.
    assert job.times[0] - started < 0.05
    gaps = [b - a for a, b in zip(job.times, job.times[1:], strict=False)]
    assert all(gap >= 0.05 for gap in gaps), gaps


async def test_first_after_delays_the_first_run() -> None:
    job = Job()
    started = time.monotonic()
    task = asyncio.create_task(run_periodically("prune", job, every=10, first_after=0.1))
    try:
        await wait_until(lambda: job.times, 5)
    finally:
        await stop(task)
    assert job.times[0] - started >= 0.1  # measures the delay itself
    assert len(job.times) == 1


async def test_a_failing_job_is_logged_and_tried_again() -> None:
    job = Job(RuntimeError("database is locked"), None)
    with capture_logs() as logs:
        task = asyncio.create_task(run_periodically("prune", job, every=0.01))
        try:
            await wait_until(lambda: len(job.times) >= 2, 5)
        finally:
            await stop(task)
    failed = [e for e in logs if e["event"] == "maintenance.failed"]
    assert failed == [
        {
            "event": "maintenance.failed",
            "job": "prune",
            "error": "database is locked",
            "log_level": "warning",
        }
    ]
    done = [e for e in logs if e["event"] == "maintenance.done"]
    assert done and done[0]["result"] == "pruned 2"


async def test_cancelling_ends_the_loop_even_mid_job() -> None:
    entered = asyncio.Event()

    async def slow() -> None:
        entered.set()
        await asyncio.Event().wait()  # never finishes by itself

    task = asyncio.create_task(run_periodically("slow", slow, every=0.01))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_a_job_that_is_itself_cancelled_ends_the_loop() -> None:
    job = Job(asyncio.CancelledError())
    task = asyncio.create_task(run_periodically("prune", job, every=0.01))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(job.times) == 1  # not swallowed and retried like a failure


async def test_a_cancellation_the_job_turns_into_its_error_still_ends_the_loop() -> None:
    asked = asyncio.Event()
    cancels = 0

    async def job() -> None:
        nonlocal cancels
        asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:  # as a driver tearing its connection down may
            cancels += 1
            if cancels > 1:
                raise
            raise RuntimeError("connection closed mid-query") from None

    task = asyncio.create_task(run_periodically("prune", job, every=0.05))
    await asyncio.wait_for(asked.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:  # it logged maintenance.failed and went on
        await stop(task)
    assert task in done and task.cancelled() and cancels == 1
