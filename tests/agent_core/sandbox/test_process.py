"""``run_process``: both streams capped while still drained, the deadline, and nothing of the
process left once the call returns or is cancelled."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import warnings
from pathlib import Path

import pytest

from agent_core.sandbox.process import run_process
from tests.exec_support import gone, processes_with

ENV = {"PATH": "/usr/bin:/bin"}


async def test_streams_are_capped_but_drained() -> None:
    # 1 MiB on each stream would block a writer whose pipe nobody reads.
    cmd = "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2; echo done >&2"
    result = await run_process(["/bin/sh", "-c", cmd], env=ENV, wall_time=10, keep=100)
    assert result.exit_code == 0 and not result.timed_out
    assert len(result.stdout.data) == 100 and result.stdout.total == 1 << 20
    assert result.stderr.total == (1 << 20) + 5 and result.stderr.cut == result.stderr.total - 100


async def test_exactly_the_given_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPGATE_TEST_SECRET", "nope")
    result = await run_process(["/usr/bin/env"], env={"A": "1"}, wall_time=5, keep=1000)
    assert result.stdout.data == b"A=1\n"


async def test_the_deadline_kills_the_whole_group() -> None:
    marker = "876.5431"
    result = await run_process(
        ["/bin/sh", "-c", f"sleep {marker} & sleep {marker}; echo never"],
        env=ENV,
        wall_time=0.3,
        keep=100,
    )
    assert result.timed_out and result.exit_code is None and result.stdout.data == b""
    assert await gone(marker)


async def test_background_children_die_when_it_exits() -> None:
    marker = "765.4312"
    result = await run_process(
        ["/bin/sh", "-c", f"sleep {marker} > /dev/null 2>&1 & echo started"],
        env=ENV,
        wall_time=5,
        keep=100,
    )
    assert result.stdout.data == b"started\n"
    assert await gone(marker)


async def test_cancelling_kills_it(tmp_path: Path) -> None:
    marker = "654.3121"
    task = asyncio.create_task(
        run_process(["/bin/sleep", marker], env=ENV, wall_time=30, keep=10, cwd=tmp_path)
    )
    while not processes_with(marker):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(marker)


async def test_output_before_an_escaped_grandchild_is_kept() -> None:
    # setsid takes the sleeper out of the group the deadline kills: it keeps stdout open, and
    # the reader gives up after a grace period, with what came before.
    marker = "543.2101"
    cmd = f"echo before; setsid sleep {marker} & echo after"
    try:
        result = await run_process(
            ["/bin/sh", "-c", cmd], env=ENV, wall_time=5, keep=100, drain=0.2
        )
        assert result.stdout.data == b"before\nafter\n" and result.exit_code == 0
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


async def test_an_escaped_grandchild_does_not_hold_the_deadline() -> None:
    marker = "432.1012"
    cmd = f"setsid sleep {marker} & sleep {marker}"
    try:
        result = await run_process(
            ["/bin/sh", "-c", cmd], env=ENV, wall_time=0.3, keep=100, drain=0.2
        )
        assert result.timed_out and result.duration < 3
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_cancelled_process_is_reaped_before_the_call_ends() -> None:
    # Its exit reaches the loop through the child watcher. A loop that closes before it arrives
    # leaves a Popen that warns "still running" when collected, during whatever runs next.
    marker = "321.0123"

    async def cancel_one() -> None:
        task = asyncio.create_task(
            run_process(["/bin/sleep", marker], env=ENV, wall_time=30, keep=10)
        )
        while not processes_with(marker):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cancel_one())
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
