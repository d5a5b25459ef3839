"""The ``docker`` backend: one throw-away container per command.

``docker run --rm --network none --read-only --cap-drop ALL``, no new privileges, the workspace
mounted read-write at ``/workspace``, a private ``/tmp``, the limits as Docker's own
(``--memory``, ``--pids-limit``), and the command's variables passed by name so their values
never appear on a command line. A timeout kills the container by name, since killing the
``docker`` client would leave it running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.sandbox.base import WORKDIR, ExecResult, Limits, SandboxUnavailable
from agent_core.sandbox.process import run_process

BACKEND = "docker"
DEFAULT_IMAGE = "debian:bookworm-slim"
_PROBE_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class DockerSandbox:
    image: str = DEFAULT_IMAGE
    network: bool = False
    limits: Limits = field(default_factory=Limits)
    binary: str = "docker"

    @property
    def backend(self) -> str:
        return BACKEND

    @property
    def workdir(self) -> str:
        return WORKDIR

    def _docker(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise SandboxUnavailable(BACKEND, f"{self.binary!r} not found")
        return found

    async def probe(self) -> None:
        docker = self._docker()
        try:
            proc = await asyncio.create_subprocess_exec(
                docker,
                "image",
                "inspect",
                "--format",
                "{{.Id}}",
                self.image,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
            _, err = await asyncio.wait_for(proc.communicate(), _PROBE_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # a client stuck on a dead daemon is not left behind
            await proc.wait()
            raise SandboxUnavailable(BACKEND, "the Docker daemon did not answer") from None
        if proc.returncode != 0:
            text = err.decode(errors="replace").strip().splitlines()
            detail = text[-1] if text else f"exit {proc.returncode}"
            if "daemon" in detail.lower():
                raise SandboxUnavailable(BACKEND, f"no Docker daemon reachable ({detail})")
            raise SandboxUnavailable(
                BACKEND, f"image {self.image!r} not usable ({detail}); pull it first"
            )

    def argv(self, command: str, workspace: Path, names: list[str], name: str) -> list[str]:
        limits = self.limits
        args = [
            self._docker(),
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "bridge" if self.network else "none",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "--memory",
            str(limits.memory),
            "--memory-swap",
            str(limits.memory),
            "--pids-limit",
            str(limits.processes),
            "--tmpfs",
            "/tmp",
            "--volume",
            f"{workspace}:{WORKDIR}",
            "--workdir",
            WORKDIR,
        ]
        for var in names:
            args += ["--env", var]  # the value comes from the client's environment
        return [*args, self.image, "/bin/sh", "-c", command]

    async def run(
        self,
        command: str,
        workspace: Path,
        env: Mapping[str, str],
        *,
        wall_time: float,
        keep: int,
    ) -> ExecResult:
        name = f"loopgate-exec-{uuid.uuid4().hex[:12]}"
        client_env = {**env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for var in ("DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT"):
            if var in os.environ:
                client_env[var] = os.environ[var]
        argv = self.argv(command, workspace, sorted(set(env) - {"PATH"}), name)

        async def kill() -> None:
            with contextlib.suppress(OSError):
                killer = await asyncio.create_subprocess_exec(
                    self._docker(),
                    "kill",
                    name,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                    env=client_env,
                )
                try:
                    await asyncio.wait_for(killer.wait(), _PROBE_TIMEOUT)
                except TimeoutError:  # the daemon is gone; the run's own kill still holds
                    killer.kill()
                    await killer.wait()

        return await run_process(
            argv, env=client_env, wall_time=wall_time, keep=keep, on_timeout=kill
        )
