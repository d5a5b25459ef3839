"""finish_despite_cancel: clean-up work survives repeated cancels, within a grace period."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from agent_core.uncancellable import cancel_and_wait, finish_despite_cancel


async def test_returns_the_result_when_nobody_cancels() -> None:
    async def work() -> int:
        await asyncio.sleep(0)  # kept: work with a suspension point
        return 7

    assert await finish_despite_cancel(work()) == 7


async def test_work_runs_to_its_end_through_two_cancels_then_the_cancel_propagates() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def work() -> None:
        started.set()
        await release.wait()
        done.append("saved")

    outer = asyncio.create_task(finish_despite_cancel(work()))
    await started.wait()
    outer.cancel()
    await asyncio.sleep(0.01)  # kept (negative check)
    outer.cancel()
    await asyncio.sleep(0.01)  # kept (negative check)
    assert not outer.done()  # still waiting for the work, not abandoning it
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert done == ["saved"]


async def test_hung_work_is_cancelled_after_the_grace_period() -> None:
    cancelled, hanging = asyncio.Event(), asyncio.Event()

    async def hangs() -> None:
        hanging.set()
        try:
            await asyncio.sleep(3600)  # kept: work that hangs
        except asyncio.CancelledError:
            cancelled.set()
            raise

    outer = asyncio.create_task(finish_despite_cancel(hangs(), grace=0.05))
    await asyncio.wait_for(hanging.wait(), 5)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(outer, 5)
    assert cancelled.is_set()


async def test_the_works_own_error_is_raised_when_not_cancelled() -> None:
    async def fails() -> None:
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        await finish_despite_cancel(fails())


async def _slow_to_end(unwinding: asyncio.Event) -> None:
    """A child at work whose own clean-up, once cancelled, takes a moment."""
    try:
        await asyncio.sleep(10)  # kept: a child at work
    except asyncio.CancelledError:
        unwinding.set()
        await asyncio.sleep(0.1)  # kept: clean-up of its own that takes a moment
        raise


async def test_cancel_and_wait_keeps_a_cancellation_of_the_caller() -> None:
    """The caller is stopped while it waits for a child that takes a moment to end: it must
    stop too, not go on (what ``suppress(CancelledError)`` around the wait would do)."""
    went_on = False
    cleaning_up = asyncio.Event()

    async def caller() -> None:
        nonlocal went_on
        worker = asyncio.create_task(_slow_to_end(cleaning_up))
        await asyncio.sleep(0)  # kept: one yield, the child starts
        await cancel_and_wait(worker)
        went_on = True

    task = asyncio.create_task(caller())
    await asyncio.wait_for(cleaning_up.wait(), 5)  # the caller now waits for the child
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not went_on


async def test_cancel_and_wait_returns_when_only_the_child_is_cancelled() -> None:
    worker = asyncio.create_task(asyncio.sleep(10))  # kept: a child at work
    await asyncio.sleep(0)  # kept: one yield, the child starts
    await cancel_and_wait(worker)
    assert worker.cancelled()


async def test_cancel_and_wait_in_the_clean_up_of_a_cancelled_caller_goes_on() -> None:
    """A caller stopped before it waits (its ``finally``) finishes its clean-up; only a
    cancellation arriving during the wait is its own to propagate."""
    cleaned_up = False
    started = asyncio.Event()

    async def caller() -> None:
        nonlocal cleaned_up
        worker = asyncio.create_task(asyncio.sleep(10))  # kept: a child at work
        try:
            started.set()
            await asyncio.sleep(10)  # kept: the caller at work, until it is stopped
        finally:
            await cancel_and_wait(worker)
            cleaned_up = True  # the rest of the clean-up

    task = asyncio.create_task(caller())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned_up


async def test_cancel_and_wait_in_a_clean_up_survives_a_second_cancel() -> None:
    """Stopped twice (``/stop`` sent twice): the second cancellation, arriving while the clean
    up waits for a child, does not cut the rest of the clean-up short."""
    cleaned_up = False
    started = asyncio.Event()
    child_unwinding = asyncio.Event()

    async def caller() -> None:
        nonlocal cleaned_up
        worker = asyncio.create_task(_slow_to_end(child_unwinding))
        try:
            started.set()
            await asyncio.sleep(10)  # kept: the caller at work, until it is stopped
        except asyncio.CancelledError:
            pass  # handled: the caller ends as "stopped", as a turn does
        finally:
            await cancel_and_wait(worker)
            cleaned_up = True  # the rest of the clean-up

    task = asyncio.create_task(caller())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    await asyncio.wait_for(child_unwinding.wait(), 5)  # the caller waits in its clean-up
    task.cancel()  # the second stop
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert cleaned_up
