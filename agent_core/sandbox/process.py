"""Running one sandbox process: both streams read at once and capped, a deadline, a kill.

The process starts in a session of its own, so a timeout kills its whole process group; the
sandboxes add their own way to kill what escaped the group (bwrap: the PID namespace dies with
its init; docker: ``docker kill``). Output past ``keep`` bytes is read and thrown away, so a
command that writes without end neither fills the service's memory nor blocks on a full pipe.

The exit is watched through the protocol's ``process_exited``, not ``Process.wait()``, which
also waits for the pipes to close: a grandchild that left the group (``setsid``) and kept
stdout open would otherwise hold the call until it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from agent_core.sandbox.base import ExecResult, Stream

DRAIN_GRACE = 2.0  # seconds to collect what an exited process still had in its pipes
REAP_GRACE = 1.0  # seconds a killed process has to be reaped before a cancelled call ends


class _Capture:
    """One stream's first ``keep`` bytes and its total."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.kept = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.kept) < self.keep:
            self.kept += data[: self.keep - len(self.kept)]

    @property
    def stream(self) -> Stream:
        return Stream(bytes(self.kept), self.total)


class _Watch(asyncio.SubprocessProtocol):
    def __init__(self, keep: int) -> None:
        loop = asyncio.get_running_loop()
        self.out, self.err = _Capture(keep), _Capture(keep)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data if isinstance(data, bytes) else data.encode()
        (self.out if fd == 1 else self.err).add(chunk)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    wall_time: float,
    keep: int,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
    on_timeout: Callable[[], Awaitable[None]] | None = None,
    drain: float = DRAIN_GRACE,
) -> ExecResult:
    """Run ``argv`` with exactly ``env``; kill its process group after ``wall_time`` seconds
    (then ``on_timeout`` runs too) and once it exits (background children die with it)."""
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    transport, watch = await loop.subprocess_exec(
        lambda: _Watch(keep),
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    pid = transport.get_pid()
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(watch.exited), wall_time)
        except TimeoutError:
            timed_out = True
            _kill_group(pid)
            if on_timeout is not None:
                await on_timeout()
            await watch.exited
        _kill_group(pid)  # what it left running in the background
        # What is still in the pipes; a grandchild that left the group may hold them open.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(watch.closed), drain)
    except BaseException:
        # Cancelled (/stop) or failed: nothing may outlive the call.
        _kill_group(pid)
        if on_timeout is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(on_timeout())
        # Its exit must reach the loop before the call ends: a loop closed first never hears of
        # it, and the Popen left behind warns "still running" wherever it is collected.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(watch.exited), REAP_GRACE)
        raise
    finally:
        transport.close()
    return ExecResult(
        exit_code=None if timed_out else transport.get_returncode(),
        stdout=watch.out.stream,
        stderr=watch.err.stream,
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
