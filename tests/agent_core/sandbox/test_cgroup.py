"""The pids cgroup used when the service runs as real root (where RLIMIT_NPROC never holds)."""

from __future__ import annotations

import pytest

from agent_core.sandbox.cgroup import PidsCgroup, find_pids_parent, real_root


async def test_a_cgroup_per_command_is_made_limited_and_removed() -> None:
    parent = find_pids_parent()
    if parent is None:
        pytest.skip("no writable pids cgroup here")
    cgroup = PidsCgroup(parent, 7)
    assert (cgroup.path / "pids.max").read_text().strip() == "7"
    await cgroup.remove()
    assert not cgroup.path.exists()
    await cgroup.remove()  # twice is harmless


def test_real_root_reads_the_user_namespace() -> None:
    import os

    assert real_root() == (os.geteuid() == 0 and _maps_root_to_root())


def _maps_root_to_root() -> bool:
    with open("/proc/self/uid_map") as f:
        return any(line.split()[:2] == ["0", "0"] for line in f)
