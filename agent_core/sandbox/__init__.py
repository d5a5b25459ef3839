"""Sandboxes for the ``exec`` tool: ``bwrap`` (default), ``docker``, or ``none`` (the host).

:func:`build_sandbox` makes the configured one; :meth:`Sandbox.probe` says whether it can run
here. Nothing here ever falls back to the host on its own.
"""

from agent_core.sandbox.base import (
    BASE_ENV,
    MAX_OUTPUT,
    MEMORY,
    PROCESSES,
    TIMEOUT,
    WORKDIR,
    ExecResult,
    Limits,
    Sandbox,
    SandboxUnavailable,
    Stream,
)
from agent_core.sandbox.bwrap import BwrapSandbox
from agent_core.sandbox.docker import DEFAULT_IMAGE, DockerSandbox
from agent_core.sandbox.host import HostSandbox

BACKENDS = ("bwrap", "docker", "none")


def build_sandbox(
    backend: str, *, network: bool = False, limits: Limits | None = None, image: str = ""
) -> Sandbox:
    """The backend named ``backend`` (one of :data:`BACKENDS`)."""
    limits = limits or Limits()
    if backend == "bwrap":
        return BwrapSandbox(network=network, limits=limits)
    if backend == "docker":
        return DockerSandbox(image=image or DEFAULT_IMAGE, network=network, limits=limits)
    if backend == "none":
        return HostSandbox(limits=limits)
    raise ValueError(f"unknown sandbox {backend!r} (one of: {', '.join(BACKENDS)})")


__all__ = [
    "BACKENDS",
    "BASE_ENV",
    "DEFAULT_IMAGE",
    "MAX_OUTPUT",
    "MEMORY",
    "PROCESSES",
    "TIMEOUT",
    "WORKDIR",
    "BwrapSandbox",
    "DockerSandbox",
    "ExecResult",
    "HostSandbox",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
    "Stream",
    "build_sandbox",
]
