"""``sandbox: none``: commands run on the host, as the service, in the workspace folder.

For a trusted single-user setup only: nothing is isolated (the command sees the whole file
system and the network); only the environment, the wall time (the process group is killed),
the address space and the output size are limited. Start-up logs a warning every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.sandbox.base import PRLIMIT, ExecResult, Limits, require_prlimit
from agent_core.sandbox.process import run_process

BACKEND = "none"


@dataclass(frozen=True, slots=True)
class HostSandbox:
    limits: Limits = field(default_factory=Limits)

    @property
    def backend(self) -> str:
        return BACKEND

    @property
    def network(self) -> bool:
        return True

    @property
    def workdir(self) -> str:
        return "the workspace folder on the host"

    async def probe(self) -> None:
        require_prlimit(BACKEND)

    async def run(
        self,
        command: str,
        workspace: Path,
        env: Mapping[str, str],
        *,
        wall_time: float,
        keep: int,
    ) -> ExecResult:
        argv = [PRLIMIT, f"--as={self.limits.memory}", "--core=0", "--"]
        argv += ["/bin/sh", "-c", command]
        return await run_process(argv, env=env, wall_time=wall_time, keep=keep, cwd=workspace)
