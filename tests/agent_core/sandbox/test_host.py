"""``sandbox: none``: runs on the host in the workspace folder, with only the given
environment, the wall time and the memory limit."""

from __future__ import annotations

from pathlib import Path

from agent_core.sandbox import BASE_ENV, HostSandbox, Limits
from agent_core.tools import exec_tool

LIMITS = Limits(timeout=5, memory=128 << 20)


async def test_runs_in_the_workspace_with_the_given_environment(tmp_path: Path) -> None:
    sandbox = HostSandbox(LIMITS)
    await sandbox.probe()
    result = await sandbox.run("pwd; env | sort", tmp_path, BASE_ENV, wall_time=5, keep=4096)
    lines = result.stdout.data.decode().splitlines()
    assert lines[0] == str(tmp_path)
    assert {line.split("=", 1)[0] for line in lines[1:]} <= {*BASE_ENV, "PWD", "OLDPWD"}
    assert sandbox.network and sandbox.backend == "none"


async def test_memory_is_limited(tmp_path: Path) -> None:
    hog = "python3 -c 'bytearray(512 << 20)' 2>&1 | tail -1"
    result = await HostSandbox(LIMITS).run(hog, tmp_path, BASE_ENV, wall_time=5, keep=4096)
    assert b"MemoryError" in result.stdout.data


def test_the_tool_says_it_runs_on_the_host() -> None:
    description = exec_tool(HostSandbox(LIMITS)).description
    assert "on the host, without a sandbox" in description and "in a sandbox" not in description
