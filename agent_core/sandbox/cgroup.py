"""The process-count limit where ``RLIMIT_NPROC`` does not hold: a pids cgroup per command.

The kernel never applies ``RLIMIT_NPROC`` to the real root user (uid 0 of the host), and a
sandbox's user namespace maps its user to the caller's: a service running as real root would
leave a fork bomb unbounded. There the sandbox goes into a pids cgroup of its own (cgroup v2
where the service's own cgroup lets us create children with the pids controller, else v1's
pids hierarchy), created for one command and removed after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_ROOT = Path("/sys/fs/cgroup")


def real_root() -> bool:
    """The service runs as uid 0 of the host (not root inside a user namespace)."""
    if os.geteuid() != 0:
        return False
    try:
        for line in Path("/proc/self/uid_map").read_text().splitlines():
            inside, outside, _count = line.split()
            if inside == "0":
                return outside == "0"
    except (OSError, ValueError):
        return True
    return True


def _own_path(hierarchy: str) -> str | None:
    """This process's cgroup path in the hierarchy named ``hierarchy`` ("" for cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers == hierarchy or hierarchy in controllers.split(","):
            return path
    return None


def find_pids_parent() -> Path | None:
    """A cgroup directory we may create pids-limited children in, or None."""
    v2 = _own_path("")
    if v2 is not None:
        for base in (_ROOT, _ROOT / "unified"):
            parent = base / v2.lstrip("/")
            controllers = parent / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                if "pids" in controllers.read_text().split() and os.access(parent, os.W_OK):
                    return parent
    v1 = _own_path("pids")
    if v1 is not None:
        parent = _ROOT / "pids" / v1.lstrip("/")
        if (parent / "cgroup.procs").exists() and os.access(parent, os.W_OK):
            return parent
    return None


class PidsCgroup:
    """One command's cgroup: ``pids.max`` set before the command's first process joins it."""

    def __init__(self, parent: Path, limit: int) -> None:
        self.path = parent / f"loopgate-exec-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    async def remove(self) -> None:
        # The kernel frees an exited process's cgroup membership a moment later: retry, from
        # 1 ms doubling, for about a second.
        delay = 0.001
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if delay > 0.6:
                    log.warning("exec.cgroup_left", path=str(self.path))
                    return
                await asyncio.sleep(delay)
                delay *= 2
