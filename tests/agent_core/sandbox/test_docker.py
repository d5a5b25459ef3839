"""The ``docker`` backend. Running a container needs a Docker daemon, which these machines
don't have: here the command line is checked, and a missing daemon must make the backend
unavailable (so ``exec`` is not offered), never a fallback. With a daemon and the image
present, the last test runs a real command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_core.sandbox import DockerSandbox, Limits, SandboxUnavailable, docker
from tests.exec_support import gone

LIMITS = Limits(timeout=5, memory=256 << 20, processes=32)


def daemon() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    return done.returncode == 0


def test_the_command_line_isolates_and_limits(tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker client")
    argv = DockerSandbox(image="alpine:3", limits=LIMITS).argv(
        "echo hi", tmp_path, ["GH_TOKEN"], "loopgate-exec-x"
    )
    joined = " ".join(argv)
    for flags in (
        "run --rm --name loopgate-exec-x",
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        f"--memory {256 << 20} --memory-swap {256 << 20}",
        "--pids-limit 32",
        "--tmpfs /tmp",
        f"--volume {tmp_path}:/workspace --workdir /workspace",
        "--env GH_TOKEN alpine:3 /bin/sh -c echo hi",
    ):
        assert flags in joined
    assert argv[-3:] == ["/bin/sh", "-c", "echo hi"]
    assert f"--user {os.getuid()}:{os.getgid()}" in joined
    network = DockerSandbox(network=True, limits=LIMITS).argv("x", tmp_path, [], "n")
    assert "--network bridge" in " ".join(network)


async def test_missing_docker_is_unavailable() -> None:
    with pytest.raises(SandboxUnavailable, match="not found"):
        await DockerSandbox(binary="docker-not-installed").probe()


@pytest.mark.skipif(daemon(), reason="a Docker daemon runs here")
async def test_no_daemon_is_unavailable_with_the_reason() -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker client")
    with pytest.raises(SandboxUnavailable, match="daemon"):
        await DockerSandbox().probe()


@pytest.mark.skipif(not daemon(), reason="needs a Docker daemon (none on these machines)")
async def test_runs_in_a_container(tmp_path: Path) -> None:
    sandbox = DockerSandbox(limits=LIMITS)
    await sandbox.probe()
    result = await sandbox.run(
        "pwd; echo x > f; touch /etc/x 2>&1",
        tmp_path,
        {"PATH": "/usr/bin:/bin"},
        wall_time=20,
        keep=4096,
    )
    assert result.stdout.data.startswith(b"/workspace\n") and (tmp_path / "f").exists()
    assert b"Read-only" in result.stdout.data


async def test_a_client_that_hangs_is_unavailable_and_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = "6.01031"  # seconds: outlives the check, and not long if it leaks
    client = tmp_path / "docker"
    client.write_text(f"#!/bin/sh\nexec sleep {marker}\n")
    client.chmod(0o755)
    monkeypatch.setattr(docker, "_PROBE_TIMEOUT", 0.3)
    with pytest.raises(SandboxUnavailable, match="did not answer"):
        await DockerSandbox(binary=str(client)).probe()
    assert await gone(marker)


async def test_a_deadline_with_a_hung_daemon_still_ends_in_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `docker kill` hangs too: the run still ends as timed out, and no client is left behind.
    run_marker, kill_marker = "6.01032", "6.01033"
    client = tmp_path / "docker"
    client.write_text(
        f'#!/bin/sh\ncase "$1" in kill) exec sleep {kill_marker};; '
        f"*) exec sleep {run_marker};; esac\n"
    )
    client.chmod(0o755)
    monkeypatch.setattr(docker, "_PROBE_TIMEOUT", 0.3)
    result = await DockerSandbox(binary=str(client), limits=LIMITS).run(
        "true", tmp_path, {"PATH": "/usr/bin:/bin"}, wall_time=0.3, keep=100
    )
    assert result.timed_out and result.exit_code is None
    assert await gone(run_marker) and await gone(kill_marker)
