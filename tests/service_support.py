"""The installed ``loopgate`` command in a subprocess, as an operator runs it.

Shared by ``test_service.py`` (serve, chat, check-config) and ``test_restart_e2e.py`` (deploys
and crashes against the fake platforms): a clean environment, a free port, ``loopgate serve``
started and waited for until ``/healthz`` answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx

__all__ = ["clean_env", "free_port", "run_cli", "start_server"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LOOPGATE_"))}
    env.pop("PORT", None)
    env["HOME"] = str(tmp_path)
    return env


async def run_cli(tmp_path: Path, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args,
        cwd=tmp_path, env=clean_env(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start_server(
    tmp_path: Path,
    *args: str,
    port: int | None = None,
    stderr: int | IO[bytes] = asyncio.subprocess.PIPE,
    timeout: float = 20,
    sigint_ignored: bool | None = None,
) -> tuple[asyncio.subprocess.Process, str]:
    """``loopgate serve [args]`` in a subprocess, once ``/healthz`` answers 200.

    ``stderr`` (the log) is a pipe by default; a long-running server should log to a file
    instead, since a pipe nobody reads fills up and blocks it. ``sigint_ignored``: start it
    with SIGINT ignored (as a shell starts a background command) or not, whatever this
    process inherited; None: as inherited.
    """
    port = port or free_port()
    preexec = None
    if sigint_ignored is not None:
        disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL

        def preexec() -> None:
            signal.signal(signal.SIGINT, disposition)

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "serve", *args, "--port", str(port),
        cwd=tmp_path, env=clean_env(tmp_path),
        stdout=asyncio.subprocess.DEVNULL, stderr=stderr, preexec_fn=preexec,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient() as client:
        while loop.time() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{base}/healthz")).status_code == 200:
                    return proc, base
            if proc.returncode is not None:
                raise AssertionError(f"server exited early with {proc.returncode}")
            await asyncio.sleep(0.1)
    proc.terminate()
    await asyncio.wait_for(proc.wait(), 20)
    raise AssertionError("server did not become healthy")


async def until(
    predicate: Callable[[], object], what: Callable[[], str], timeout: float = 15
) -> None:
    """Poll ``predicate`` (state outside the fakes' own ``wait_for``: the LLM, several fakes);
    ``what`` describes the state when it times out."""

    async def loop() -> None:
        while not predicate():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        raise AssertionError(f"not met in {timeout}s: {what()}") from None
