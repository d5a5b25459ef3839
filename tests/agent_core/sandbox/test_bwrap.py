"""Escape attempts from the bwrap sandbox, each through the fake model calling ``exec``: every
one must fail, and the host must show no trace of it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from agent_core import RunStatus
from agent_core.sandbox import BASE_ENV, BwrapSandbox, Limits, SandboxUnavailable
from agent_core.sandbox.process import run_process
from agent_core.tools import Credential
from tests.exec_support import TEST_LIMITS, gone, needs_bwrap, run_calls, run_exec
from tests.fakes.llm_server import FakeLLM

pytestmark = needs_bwrap

HOST_SECRET = "host-secret-value-7f3a91"
needs_python = pytest.mark.skipif(
    not os.path.exists("/usr/bin/python3"), reason="the probe programs use /usr/bin/python3"
)


class TestCommands:
    async def test_runs_in_the_workspace_and_reports_both_streams(
        self, llm: FakeLLM, tmp_path: Path
    ) -> None:
        run = await run_exec(llm, tmp_path, "pwd; echo made > note.txt; echo oops >&2; exit 3")
        assert run.result.status is RunStatus.COMPLETED
        assert run.output.startswith("exit code: 3")
        assert "stdout:\n/workspace\n" in run.output and "stderr:\noops" in run.output
        assert (run.workspace / "note.txt").read_text() == "made\n"

    async def test_long_output_is_cut_with_a_note(self, llm: FakeLLM, tmp_path: Path) -> None:
        run = await run_exec(llm, tmp_path, "head -c 10000 /dev/zero | tr '\\0' x")
        shown = run.output.split("stdout:\n", 1)[1].split("\n", 1)[0]
        assert shown == "x" * TEST_LIMITS.max_output
        assert "[stdout cut: 5904 more bytes not shown]" in run.output


class TestFileSystem:
    async def test_writes_outside_the_workspace_fail(self, llm: FakeLLM, tmp_path: Path) -> None:
        outside = tmp_path / "outside.txt"  # the real workspace's parent's parent
        command = (
            "for f in /etc/evil /usr/evil /evil ../evil ../../evil "
            f"{outside} {tmp_path}/workspaces/evil; do "
            'echo x > "$f" 2>/dev/null && echo "WROTE $f"; done; echo checked'
        )
        run = await run_exec(llm, tmp_path, command)
        assert "checked" in run.output and "WROTE" not in run.output
        assert not outside.exists() and not (tmp_path / "workspaces" / "evil").exists()
        assert not _exists("/etc/evil") and not _exists("/usr/evil")

    async def test_the_host_is_not_visible(self, llm: FakeLLM, tmp_path: Path) -> None:
        run = await run_exec(
            llm, tmp_path, f"ls / ; ls /root /home {tmp_path} 2>&1; cat /etc/shadow 2>&1"
        )
        listing = run.output.split("stdout:\n", 1)[1]
        top = set(listing.split("ls:", 1)[0].split())
        assert top <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin"} | {
            "tmp",
            "usr",
            "workspace",
        }
        assert listing.count("No such file or directory") == 4

    async def test_a_symlink_out_of_the_workspace_leads_nowhere(
        self, llm: FakeLLM, tmp_path: Path
    ) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_text(HOST_SECRET)
        workspace = tmp_path / "workspaces" / "alice"
        workspace.mkdir(parents=True)
        (workspace / "planted").symlink_to(secret)  # e.g. left by an earlier tool
        run = await run_calls(
            llm,
            tmp_path,
            [
                ("exec", {"command": "cat planted; ln -s /etc/hostname made; echo linked"}),
                ("read_file", {"path": "made"}),
            ],
        )
        assert HOST_SECRET not in run.output and "No such file" in run.output
        assert "linked" in run.output
        # The link the sandbox made points at the host's /etc/hostname from outside: the file
        # tools resolve it there and refuse it.
        assert "outside" in run.tool_results[1].lower()
        assert _read("/etc/hostname").strip() not in run.tool_results[1]


class TestEnvironment:
    async def test_no_variable_of_the_service_is_visible(
        self, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LOOPGATE_TEST_SECRET", HOST_SECRET)
        command = "cat /proc/1/environ; echo; cat /proc/self/environ; echo; env; echo end"
        run = await run_exec(llm, tmp_path, command)
        assert "end" in run.output and "PATH=/usr/local/bin:/usr/bin:/bin" in run.output
        assert HOST_SECRET not in run.output and "LOOPGATE_TEST_SECRET" not in run.output
        assert os.getcwd() not in run.output  # not even the service's folder

    async def test_pid_1_is_the_sandbox_s_own(self, llm: FakeLLM, tmp_path: Path) -> None:
        run = await run_exec(llm, tmp_path, "cat /proc/1/cmdline | tr '\\0' ' '; ls /proc")
        assert "bwrap" in run.output  # bwrap's init, not the host's PID 1
        pids = [w for w in run.output.split() if w.isdigit()]
        assert len(pids) < 10


class TestNetwork:
    @needs_python
    async def test_loopback_of_the_host_is_unreachable(self, llm: FakeLLM, tmp_path: Path) -> None:
        probe = (
            "python3 -c \"import urllib.request as u; print(u.urlopen('"
            f"{llm.base_url}/models', timeout=2).status)\" 2>&1 | tail -1"
        )
        run = await run_exec(llm, tmp_path, probe)
        assert "Errno" in run.output or "refused" in run.output.lower()
        assert [r.path for r in llm.requests if r.path.endswith("/models")] == []

    @needs_python
    async def test_network_true_reaches_it(self, llm: FakeLLM, tmp_path: Path) -> None:
        probe = (
            "python3 -c \"import urllib.request as u; print(u.urlopen('"
            f"{llm.base_url}/models', timeout=2).status)\""
        )
        sandbox = BwrapSandbox(network=True, limits=TEST_LIMITS)
        run = await run_exec(llm, tmp_path, probe, sandbox=sandbox)
        assert "stdout:\n200" in run.output


class TestLimits:
    async def test_a_fork_bomb_hits_the_process_limit(self, llm: FakeLLM, tmp_path: Path) -> None:
        run = await run_exec(llm, tmp_path, "bomb() { bomb | bomb & }; bomb; sleep 0.3; echo x")
        assert "fork" in run.output.lower()  # "Cannot fork": refused by the limit
        assert "timed out" not in run.output

    @needs_python
    async def test_processes_are_counted(self, llm: FakeLLM, tmp_path: Path) -> None:
        spawn = (
            "import os, subprocess\n"
            "started = failed = 0\n"
            "for _ in range(60):\n"
            "    try:\n"
            "        subprocess.Popen(['sleep', '3']); started += 1\n"
            "    except OSError:\n"
            "        failed += 1\n"
            "print(started, failed, sum(p.isdigit() for p in os.listdir('/proc')))\n"
        )
        run = await run_exec(llm, tmp_path, f'python3 -c "{spawn}"')
        started, failed, alive = map(int, run.output.split("stdout:\n", 1)[1].split()[:3])
        assert failed > 0 and started + failed == 60
        assert alive <= TEST_LIMITS.processes

    @needs_python
    async def test_a_memory_hog_is_refused(self, llm: FakeLLM, tmp_path: Path) -> None:
        hog = f"python3 -c 'b = bytearray({2 * TEST_LIMITS.memory}); print(len(b))'"
        run = await run_exec(llm, tmp_path, hog)
        assert "MemoryError" in run.output and "exit code: 1" in run.output

    async def test_a_command_past_its_timeout_dies_with_its_children(
        self, llm: FakeLLM, tmp_path: Path
    ) -> None:
        marker = "987.654"  # a sleep nobody else runs
        run = await run_calls(
            llm,
            tmp_path,
            [("exec", {"command": f"sleep {marker} & sleep {marker}", "timeout": 0.5})],
        )
        assert run.output.startswith("timed out after 0.5 s")
        assert await gone(marker)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to start the sandbox as another, unprivileged user",
)
class TestAsANonRootService:
    """Where the service is not root, the kernel applies RLIMIT_NPROC: the same bwrap command
    line, started as ``nobody``, holds a fork bomb without any cgroup."""

    async def test_the_process_limit_holds_without_a_cgroup(self) -> None:
        # A folder nobody may use: pytest's own are root's alone.
        workspace = Path(tempfile.mkdtemp(prefix="loopgate-nobody-"))
        os.chmod(workspace, 0o777)
        sandbox = BwrapSandbox(limits=Limits(processes=12))
        # 60 sleepers, bounded (not a real bomb): if the limit failed, nothing would run away.
        bomb = "i=0; while [ $i -lt 60 ]; do sleep 2 & i=$((i+1)); done; echo all-started"
        read_passwd, read_group = os.pipe(), os.pipe()
        for fd, text in (
            (read_passwd[1], "sandbox:x:1000:1000::/tmp:/bin/sh\n"),
            (read_group[1], "sandbox:x:1000:\n"),
        ):
            os.write(fd, text.encode())
            os.close(fd)
        fds = (read_passwd[0], read_group[0])
        argv = sandbox.argv(bomb, workspace, *fds)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        try:
            result = await run_process(
                nobody, env=BASE_ENV, wall_time=5, keep=4096, pass_fds=fds, cwd=Path("/")
            )
        finally:
            for fd in fds:
                os.close(fd)
            shutil.rmtree(workspace, ignore_errors=True)
        assert b"Cannot fork" in result.stderr.data and b"all-started" not in result.stdout.data


class TestCredentials:
    async def test_only_the_named_command_gets_them_and_the_output_hides_them(
        self, llm: FakeLLM, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        token = "ghp_0123456789abcdefSECRET"
        cred = Credential("github", "env", {"GH_TOKEN": token})
        run = await run_calls(
            llm,
            tmp_path,
            [("exec", {"command": "env"}), ("exec", {"command": "printenv GH_TOKEN; echo none"})],
            credentials=[cred],
        )
        first, second = run.tool_results
        assert "GH_TOKEN=[GH_TOKEN hidden]" in first and token not in first
        assert "none" in second and "hidden" not in second
        history = str(run.store.sessions)  # what later turns and the dashboard see
        assert "[GH_TOKEN hidden]" in history and token not in history
        assert token not in str(run.store.traces)
        logs = capsys.readouterr().out
        assert "exec.ran" in logs and token not in logs


async def test_a_missing_bwrap_is_unavailable_with_the_reason() -> None:
    with pytest.raises(SandboxUnavailable, match="not found"):
        await BwrapSandbox(binary="bwrap-not-installed").probe()
    assert shutil.which("bwrap") is not None


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()
