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
_DRAIN_GRACE = 2.0  # seconds to collect what a killed process still had in its pipes


async def _read(stream: asyncio.StreamReader | None, keep: int) -> Stream:
    if stream is None:
        return Stream(b"", 0)
    kept = bytearray()
    total = 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return Stream(bytes(kept), total)


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
    readers = asyncio.gather(_read(proc.stdout, keep), _read(proc.stderr, keep))
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
            stdout, stderr = await asyncio.wait_for(asyncio.shield(readers), _DRAIN_GRACE)
        except TimeoutError:
            # A grandchild outside the group still holds a pipe: give up on the rest.
            readers.cancel()
            stdout, stderr = Stream(b"", 0), Stream(b"", 0)
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
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
