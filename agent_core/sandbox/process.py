"""Running one sandbox process: both streams read at once and capped, a deadline, a kill.

The process starts in a session of its own, so a timeout kills its whole process group; the
sandboxes add their own way to kill what escaped the group (bwrap: the PID namespace dies with
its init; docker: ``docker kill``). Output past ``keep`` bytes is read and thrown away, so a
command that writes without end neither fills the service's memory nor blocks on a full pipe.
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

_CHUNK = 65536
DRAIN_GRACE = 2.0  # seconds to collect what an exited process still had in its pipes


class _Capture:
    """One stream's first ``keep`` bytes and its total, kept as it is read, so that what came
    before a reader is given up on is still there."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.kept = bytearray()
        self.total = 0

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        while stream is not None and (chunk := await stream.read(_CHUNK)):
            self.total += len(chunk)
            if len(self.kept) < self.keep:
                self.kept += chunk[: self.keep - len(self.kept)]

    @property
    def stream(self) -> Stream:
        return Stream(bytes(self.kept), self.total)


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
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    out, err = _Capture(keep), _Capture(keep)
    readers = asyncio.gather(out.read(proc.stdout), err.read(proc.stderr))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), wall_time)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            if on_timeout is not None:
                await on_timeout()
            await proc.wait()
        _kill_group(proc.pid)  # what it left running in the background
        try:
            await asyncio.wait_for(asyncio.shield(readers), drain)
        except TimeoutError:
            # A grandchild outside the group still holds a pipe: keep what came, stop reading.
            readers.cancel()
    except BaseException:
        # Cancelled (/stop) or failed: nothing may outlive the call.
        _kill_group(proc.pid)
        if on_timeout is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(on_timeout())
        readers.cancel()
        raise
    return ExecResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.stream,
        stderr=err.stream,
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
