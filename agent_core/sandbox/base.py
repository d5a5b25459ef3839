"""What every sandbox backend shares: its limits, what a run returns, and the protocol.

A backend runs one shell command line in the agent's workspace and gives back the exit code and
both streams. It never falls back to running on the host: a backend that can't work here says
why (:meth:`Sandbox.probe`), and the ``exec`` tool is then not offered at all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_core.errors import AgentError

TIMEOUT = 30.0  # seconds of wall time per command
MEMORY = 512 << 20  # bytes of address space per process
PROCESSES = 64  # processes (and threads) at once inside one sandbox
MAX_OUTPUT = 16 << 10  # bytes of stdout and of stderr given back to the model
WORKDIR = "/workspace"  # where the workspace appears inside a sandbox
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
PRLIMIT = "/usr/bin/prlimit"  # util-linux: sets the limits of the command it starts

# The only variables a sandboxed command starts with (credentials are added per command).
BASE_ENV: Mapping[str, str] = {
    "PATH": SANDBOX_PATH,
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "USER": "sandbox",
}


class SandboxUnavailable(AgentError):
    """The configured backend cannot run here; ``reason`` says why and how to fix it."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(f"sandbox {backend!r} unavailable: {reason}")
        self.backend = backend
        self.reason = reason


def require_prlimit(backend: str) -> None:
    if not os.path.exists(PRLIMIT):
        raise SandboxUnavailable(backend, f"{PRLIMIT} (util-linux) not found")


@dataclass(frozen=True, slots=True)
class Limits:
    timeout: float = TIMEOUT
    memory: int = MEMORY
    processes: int = PROCESSES
    max_output: int = MAX_OUTPUT


@dataclass(frozen=True, slots=True)
class Stream:
    """One output stream: its first bytes, and how many bytes it had in all."""

    data: bytes
    total: int

    @property
    def cut(self) -> int:
        return self.total - len(self.data)


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int | None  # None: killed (timeout); negative: killed by that signal
    stdout: Stream
    stderr: Stream
    timed_out: bool = False
    duration: float = 0.0


class Sandbox(Protocol):
    """A backend: ``bwrap``, ``docker`` or ``none`` (the host, for trusted setups only)."""

    @property
    def backend(self) -> str: ...

    @property
    def network(self) -> bool: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def workdir(self) -> str:
        """The working directory as the command sees it (``/workspace``, or the host path)."""
        ...

    async def probe(self) -> None:
        """Raise :class:`SandboxUnavailable` unless a command can really run in it here."""
        ...

    async def run(
        self,
        command: str,
        workspace: Path,
        env: Mapping[str, str],
        *,
        wall_time: float,
        keep: int,
    ) -> ExecResult:
        """Run ``sh -c command`` with ``workspace`` as the working directory and exactly ``env``
        as its environment, for at most ``wall_time`` seconds; keep the first ``keep`` bytes of
        each stream."""
        ...
