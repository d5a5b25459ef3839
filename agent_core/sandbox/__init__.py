"""Sandboxes for the ``exec`` tool: ``bwrap`` (default), ``docker``, or ``none`` (the host).

:func:`build_sandbox` makes the configured one; :meth:`Sandbox.probe` says whether it can run
here. Nothing here ever falls back to the host on its own.
"""

from typing import TYPE_CHECKING

from agent_core.lazy_exports import lazy_exports
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

if TYPE_CHECKING:
    from agent_core.sandbox.bwrap import BwrapSandbox
    from agent_core.sandbox.docker import DEFAULT_IMAGE, DockerSandbox
    from agent_core.sandbox.host import HostSandbox

BACKENDS = ("bwrap", "docker", "none")

# The backends (and their process and cgroup helpers) load with the first sandbox built: the
# exec tool is off by default, and a service without it should not carry them.
__getattr__ = lazy_exports(
    __name__,
    {
        "BwrapSandbox": "agent_core.sandbox.bwrap",
        "DEFAULT_IMAGE": "agent_core.sandbox.docker",
        "DockerSandbox": "agent_core.sandbox.docker",
        "HostSandbox": "agent_core.sandbox.host",
    },
)


def build_sandbox(
    backend: str, *, network: bool = False, limits: Limits | None = None, image: str = ""
) -> Sandbox:
    """The backend named ``backend`` (one of :data:`BACKENDS`)."""
    limits = limits or Limits()
    if backend == "bwrap":
        from agent_core.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(network=network, limits=limits)
    if backend == "docker":
        from agent_core.sandbox.docker import DEFAULT_IMAGE, DockerSandbox

        return DockerSandbox(image=image or DEFAULT_IMAGE, network=network, limits=limits)
    if backend == "none":
        from agent_core.sandbox.host import HostSandbox

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
