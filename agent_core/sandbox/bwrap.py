"""The ``bwrap`` backend: bubblewrap namespaces around each command.

What a command sees:

- new user, PID, IPC, UTS (and, unless ``network`` is on, network) namespaces; it runs as uid
  1000 with no capabilities, and its processes all die when the command's sandbox init does;
- ``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` links or folders read-only, ``/etc`` made of a
  few files only (no ``/etc/shadow``, no host ``/etc/passwd``), a fresh ``/proc`` of its own PID
  namespace, a minimal ``/dev`` and a private ``/tmp``; no home directory, nothing of ``/root``,
  ``/home``, ``/var`` or ``/work``;
- the workspace read-write at ``/workspace``, the working directory;
- exactly the environment it is given: bwrap is started with that environment alone, since its
  own init (PID 1 inside, ``/proc/1/environ``) keeps whatever bwrap was started with.

Limits: ``prlimit`` inside the sandbox sets the address space (``memory``) and the process
count, after the user namespace exists, so the count is of the sandbox's processes only. A
service running as real root gets a pids cgroup instead (:mod:`.cgroup`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.sandbox.base import (
    BASE_ENV,
    PRLIMIT,
    WORKDIR,
    ExecResult,
    Limits,
    SandboxUnavailable,
    require_prlimit,
)
from agent_core.sandbox.cgroup import PidsCgroup, find_pids_parent, real_root
from agent_core.sandbox.process import run_process

BACKEND = "bwrap"
SANDBOX_UID = 1000
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What commands need from /etc: the loader, time zone, TLS roots, alternatives. The host's
# passwd, group, shadow, hosts and the rest stay out.
_ETC = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
)
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf")
_PASSWD = f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/tmp:/bin/sh\n"
_GROUP = f"sandbox:x:{SANDBOX_UID}:\n"


@dataclass(frozen=True, slots=True)
class BwrapSandbox:
    network: bool = False
    limits: Limits = field(default_factory=Limits)
    binary: str = "bwrap"

    @property
    def backend(self) -> str:
        return BACKEND

    @property
    def workdir(self) -> str:
        return WORKDIR

    def _bwrap(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise SandboxUnavailable(
                BACKEND, f"{self.binary!r} not found (install Debian's bubblewrap)"
            )
        return found

    async def probe(self) -> None:
        self._bwrap()
        require_prlimit(BACKEND)
        if real_root() and find_pids_parent() is None:
            raise SandboxUnavailable(
                BACKEND,
                "the service runs as root, to which the kernel applies no process-count limit, "
                "and no writable pids cgroup was found: run Loopgate as a non-root user",
            )
        with tempfile.TemporaryDirectory(prefix="loopgate-probe-") as workspace:
            result = await self.run("true", Path(workspace), BASE_ENV, wall_time=10.0, keep=4096)
        if result.exit_code != 0:
            err = result.stderr.data.decode(errors="replace").strip() or "no output"
            raise SandboxUnavailable(
                BACKEND, f"a test command failed (exit {result.exit_code}): {err[:300]}"
            )

    def argv(self, command: str, workspace: Path, passwd_fd: int, group_fd: int) -> list[str]:
        """The whole command line (tests read it; the docs describe it)."""
        args = [
            self._bwrap(),
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into a terminal of the service
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
        ]
        if not self.network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/usr", "/usr"]
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in (*_ETC, *(_ETC_NETWORK if self.network else ())):
            args += ["--ro-bind-try", path, path]
        args += ["--file", str(passwd_fd), "/etc/passwd", "--file", str(group_fd), "/etc/group"]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--bind",
            str(workspace),
            WORKDIR,
            "--remount-ro",  # the root itself (where /etc's files were placed): no writes
            "/",
            "--chdir",
            WORKDIR,
            "--",
            PRLIMIT,
            f"--as={self.limits.memory}",
            f"--nproc={self.limits.processes}",
            "--core=0",
            "--",
            "/bin/sh",
            "-c",
            command,
        ]
        return args

    async def run(
        self,
        command: str,
        workspace: Path,
        env: Mapping[str, str],
        *,
        wall_time: float,
        keep: int,
    ) -> ExecResult:
        cgroup: PidsCgroup | None = None
        if real_root():
            parent = find_pids_parent()
            if parent is None:
                raise SandboxUnavailable(BACKEND, "no writable pids cgroup (running as root)")
            # + 1: bwrap outside the namespaces, in the cgroup too; inside, init counts.
            cgroup = PidsCgroup(parent, self.limits.processes + 1)
        fds = _files(_PASSWD, _GROUP)
        try:
            argv: Sequence[str] = self.argv(command, workspace, fds[0], fds[1])
            if cgroup is not None:
                # Join the cgroup before bwrap starts, so no process of the command is outside.
                argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup.procs), *argv]
            # From "/": bwrap's init would otherwise carry the service's folder in its PWD.
            return await run_process(
                argv, env=env, wall_time=wall_time, keep=keep, pass_fds=fds, cwd=Path("/")
            )
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if cgroup is not None:
                await cgroup.remove()


def _files(*contents: str) -> tuple[int, ...]:
    """Read ends of pipes holding ``contents`` (each small enough for a pipe's buffer), for
    bwrap's ``--file FD PATH``."""
    fds: list[int] = []
    for content in contents:
        read, write = os.pipe()
        os.write(write, content.encode())
        os.close(write)
        fds.append(read)
    return tuple(fds)
