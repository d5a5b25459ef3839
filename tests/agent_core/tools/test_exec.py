"""The ``exec`` tool's own logic against a recording sandbox: arguments, which command lines
get credentials, masking, the cut and the result's wording. (The real sandboxes:
``tests/agent_core/sandbox/``.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_core.errors import ToolError
from agent_core.sandbox import BASE_ENV, ExecResult, Limits, Stream
from agent_core.tools import Credential, ToolContext, ToolKind, exec_tool
from agent_core.tools.exec import Scrubber, credential_env, first_word

GH = Credential("github", "gh", {"GH_TOKEN": "ghp_token_value_123"})


@dataclass
class RecordingSandbox:
    """Answers with ``result`` and records what it was asked to run."""

    result: ExecResult = field(
        default_factory=lambda: ExecResult(0, Stream(b"", 0), Stream(b"", 0))
    )
    limits: Limits = field(default_factory=lambda: Limits(timeout=30, max_output=32))
    calls: list[tuple[str, Path, dict[str, str], float, int]] = field(default_factory=list)
    backend: str = "bwrap"
    network: bool = False
    workdir: str = "/workspace"

    async def probe(self) -> None:
        return None

    async def run(
        self, command: str, workspace: Path, env: Mapping[str, str], *, wall_time: float, keep: int
    ) -> ExecResult:
        self.calls.append((command, workspace, dict(env), wall_time, keep))
        return self.result


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        workspace=tmp_path / "ws", session_key="s", user_id="u", agent_id="main", run_id="r"
    )


def out(data: bytes, total: int | None = None) -> Stream:
    return Stream(data, len(data) if total is None else total)


class TestFirstWord:
    @pytest.mark.parametrize(
        ("line", "word"),
        [
            ("gh pr list", "gh"),
            ("  /usr/bin/gh api user", "/usr/bin/gh"),
            ("'gh' x", "gh"),
            ("GH_TOKEN=x gh", "GH_TOKEN=x"),
            ("echo 'unbalanced", "echo"),
            ("# only a comment", ""),
        ],
    )
    def test_the_program_the_shell_runs_first(self, line: str, word: str) -> None:
        assert first_word(line) == word

    def test_credentials_go_only_to_their_command(self) -> None:
        assert credential_env("gh pr list", [GH]) == {"GH_TOKEN": "ghp_token_value_123"}
        assert credential_env("/usr/bin/gh pr list", [GH]) == {"GH_TOKEN": "ghp_token_value_123"}
        for line in ("ghx", "echo gh", "env gh", "cat x | gh", "FOO=1 gh x"):
            assert credential_env(line, [GH]) == {}, line


class TestScrubber:
    def test_longest_value_first_and_short_values_left(self) -> None:
        scrub = Scrubber(
            [
                Credential("a", "a", {"A": "secret-abc", "B": "secret-abc-longer", "C": "ab"}),
            ]
        )
        assert scrub("x secret-abc-longer y secret-abc ab") == "x [B hidden] y [A hidden] ab"
        assert scrub.longest == len("secret-abc-longer")


class TestTool:
    async def test_runs_with_the_base_environment_and_the_limit(self, tmp_path: Path) -> None:
        sandbox = RecordingSandbox(result=ExecResult(0, out(b"hi\n"), out(b"")))
        tool = exec_tool(sandbox, [GH])
        assert tool.kind is ToolKind.EXEC and tool.name == "exec"
        result = await tool.handler({"command": "echo hi", "timeout": 99}, ctx(tmp_path))
        assert result == "exit code: 0\nstdout:\nhi\n\nstderr:\n(empty)"
        command, workspace, env, wall_time, keep = sandbox.calls[0]
        assert (command, workspace, env) == ("echo hi", tmp_path / "ws", dict(BASE_ENV))
        assert wall_time == 30 and keep == 32 + len("ghp_token_value_123")
        assert workspace.is_dir()

    async def test_a_shorter_timeout_is_kept(self, tmp_path: Path) -> None:
        sandbox = RecordingSandbox()
        await exec_tool(sandbox).handler({"command": "true", "timeout": 2.5}, ctx(tmp_path))
        assert sandbox.calls[0][3] == 2.5

    @pytest.mark.parametrize(
        "args",
        [
            {},
            {"command": ""},
            {"command": 5},
            {"command": "x" * 9000},
            {"command": "true", "timeout": 0},
        ],
    )
    async def test_bad_arguments_are_tool_errors(
        self, tmp_path: Path, args: dict[str, object]
    ) -> None:
        sandbox = RecordingSandbox()
        with pytest.raises(ToolError):
            await exec_tool(sandbox).handler(args, ctx(tmp_path))
        assert sandbox.calls == []

    async def test_a_secret_across_the_cut_is_masked_whole(self, tmp_path: Path) -> None:
        token = "ghp_token_value_123"
        data = b"x" * 25 + token.encode() + b"tail"
        sandbox = RecordingSandbox(result=ExecResult(0, out(data, 5000), out(b"")))
        result = await exec_tool(sandbox, [GH]).handler({"command": "gh x"}, ctx(tmp_path))
        assert "ghp_" not in result and "[GH_TOKEN hidden]"[:7] in result
        assert "stdout cut:" in result

    async def test_timeouts_and_signals_are_said(self, tmp_path: Path) -> None:
        timed = RecordingSandbox(result=ExecResult(None, out(b"part"), out(b""), timed_out=True))
        result = await exec_tool(timed).handler({"command": "sleep 99"}, ctx(tmp_path))
        assert result.startswith("timed out after 30 s") and "part" in result
        killed = RecordingSandbox(result=ExecResult(-9, out(b""), out(b"")))
        assert (await exec_tool(killed).handler({"command": "x"}, ctx(tmp_path))).startswith(
            "killed by signal 9"
        )
