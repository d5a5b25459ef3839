"""``tools.exec`` → the sandbox, probed once at start-up, and what each agent's ``exec`` gets.

The probe runs a real command in the chosen sandbox: a backend that is installed but cannot
work here (no user namespaces, no Docker daemon, running as root without a pids cgroup) is as
unavailable as a missing one. Then the tool is simply not offered, ``exec.unavailable`` is
logged with the reason, and ``loopgate check-config`` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from agent_core import Approval, ExecProfile
from agent_core.sandbox import Limits, Sandbox, SandboxUnavailable, build_sandbox
from agent_core.tools import Credential
from bot.config import Config
from bot.config.exec_tool import ExecConfig

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ExecRuntime:
    config: ExecConfig
    sandbox: Sandbox
    unavailable: str | None = None  # why the tool is not offered; None: it is

    @property
    def available(self) -> bool:
        return self.unavailable is None

    @property
    def credentials(self) -> tuple[Credential, ...]:
        return tuple(
            Credential(name, cred.command, dict(cred.env))
            for name, cred in self.config.credentials.items()
        )

    def profile(self, owner_ids: Sequence[str], admins: Sequence[str]) -> ExecProfile:
        limits = self.sandbox.limits
        approval = self.config.approval
        return ExecProfile(
            backend=self.sandbox.backend,
            workdir=self.sandbox.workdir,
            network=self.sandbox.network,
            timeout=limits.timeout,
            memory=limits.memory,
            processes=limits.processes,
            max_output=limits.max_output,
            approval=Approval(approval) if approval is not None else None,
            approval_timeout=self.config.approval_timeout,
            credentials=tuple(sorted({c.command for c in self.config.credentials.values()})),
            trusted=frozenset((*owner_ids, *admins)),
        )


def build_exec_sandbox(config: ExecConfig) -> Sandbox:
    limits = Limits(
        timeout=config.timeout,
        memory=int(config.memory),
        processes=config.max_processes,
        max_output=int(config.max_output),
    )
    return build_sandbox(config.sandbox, network=config.network, limits=limits, image=config.image)


async def prepare_exec(config: Config) -> ExecRuntime | None:
    """The probed sandbox of ``tools.exec``; None when the tool is off."""
    exec_config = config.tools.exec
    if not exec_config.enabled:
        return None
    sandbox = build_exec_sandbox(exec_config)
    try:
        await sandbox.probe()
    except SandboxUnavailable as exc:
        log.error("exec.unavailable", sandbox=exec_config.sandbox, reason=exc.reason)
        return ExecRuntime(exec_config, sandbox, unavailable=exc.reason)
    if exec_config.sandbox == "none":
        log.warning(
            "exec.no_sandbox",
            detail="tools.exec.sandbox is none: commands run on the host as the service, with "
            "its files and network; only for a trusted single-user setup",
        )
    else:
        log.info("exec.ready", sandbox=exec_config.sandbox, network=exec_config.network)
    return ExecRuntime(exec_config, sandbox)
