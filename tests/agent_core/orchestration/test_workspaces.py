"""Team workspace handling (agent-loop spec section 11): absolute paths into a run's extra roots,
quotas per root, where a team's workspace lives, which workspace a run works in, and the folder
of a delegation with its copied inputs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agent_core.tools.files as files_module
from agent_core.errors import ToolError
from agent_core.orchestration.modes import resolve_profile
from agent_core.orchestration.records import Team, TeamSettings, WorkspaceScope
from agent_core.orchestration.workspaces import (
    RunWorkspace,
    prepare_delegation,
    resolve_run_workspace,
    team_workspace,
)
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.files import LIST_FILES, READ_FILE, WRITE_FILE
from agent_core.workspace import (
    WorkspaceEscape,
    resolve_in_roots,
    sanitize_user_id,
    user_workspace,
)

SECRET = "s3cr3t-outside"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def team_dir(tmp_path: Path) -> Path:
    path = tmp_path / "team"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    return path.resolve()


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def run(
    tool: Tool, ws: Path, roots: tuple[Path, ...], *, quota: int = 1 << 20, **a: Any
) -> str:
    ctx = ToolContext(ws, "s", "u", "main", "r", workspace_max_bytes=quota, extra_roots=roots)
    return await tool.handler(a, ctx)


# -- file tools: absolute paths into extra roots -------------------------------------------


class TestAbsolutePaths:
    async def test_absolute_paths_into_an_extra_root_read_write_and_list(
        self, ws: Path, team_dir: Path
    ) -> None:
        (team_dir / "plan.md").write_text("the plan")
        roots = (team_dir,)
        assert await run(READ_FILE, ws, roots, path=str(team_dir / "plan.md")) == "the plan"
        await run(WRITE_FILE, ws, roots, path=str(team_dir / "sub" / "out.md"), content="done")
        assert (team_dir / "sub" / "out.md").read_text() == "done"
        assert not (ws / "sub").exists()

    async def test_absolute_paths_into_the_default_workspace_work_too(self, ws: Path) -> None:
        await run(WRITE_FILE, ws, (), path=str(ws / "a.txt"), content="abs")
        assert await run(READ_FILE, ws, (), path="a.txt") == "abs"

    async def test_relative_paths_still_mean_the_default_workspace(
        self, ws: Path, team_dir: Path
    ) -> None:
        await run(WRITE_FILE, ws, (team_dir,), path="note.txt", content="mine")
        assert (ws / "note.txt").read_text() == "mine"
        assert not (team_dir / "note.txt").exists()
        with pytest.raises(ToolError, match="access denied"):
            await run(READ_FILE, ws, (team_dir,), path="../team/x.txt")

    async def test_an_absolute_path_into_a_folder_that_is_no_root_is_refused(
        self, ws: Path, team_dir: Path, outside: Path
    ) -> None:
        (team_dir / "plan.md").write_text("the plan")
        with pytest.raises(ToolError, match=r"access denied.*outside the workspace"):
            await run(READ_FILE, ws, (), path=str(team_dir / "plan.md"))
        with pytest.raises(ToolError, match=r"access denied.*outside the workspace"):
            await run(READ_FILE, ws, (team_dir,), path=str(outside / "secret.txt"))

    @pytest.mark.parametrize("tool", [READ_FILE, WRITE_FILE, LIST_FILES])
    async def test_dot_dot_out_of_an_extra_root_is_refused(
        self, ws: Path, team_dir: Path, outside: Path, tool: Tool
    ) -> None:
        path = f"{team_dir}/../outside/secret.txt"
        with pytest.raises(ToolError, match="access denied"):
            await run(tool, ws, (team_dir,), path=path, content="overwritten")
        assert (outside / "secret.txt").read_text() == SECRET

    @pytest.mark.parametrize("tool", [READ_FILE, WRITE_FILE, LIST_FILES])
    async def test_a_link_in_an_extra_root_pointing_out_is_refused(
        self, ws: Path, team_dir: Path, outside: Path, tool: Tool
    ) -> None:
        (team_dir / "file-link").symlink_to(outside / "secret.txt")
        (team_dir / "dir-link").symlink_to(outside)
        for path in (team_dir / "file-link", team_dir / "dir-link"):
            with pytest.raises(ToolError, match="access denied"):
                await run(tool, ws, (team_dir,), path=str(path), content="overwritten")
        assert (outside / "secret.txt").read_text() == SECRET

    async def test_a_nul_byte_in_an_absolute_path_is_refused(
        self, ws: Path, team_dir: Path
    ) -> None:
        with pytest.raises(ToolError, match="NUL"):
            await run(READ_FILE, ws, (team_dir,), path=f"{team_dir}/a\x00.txt")

    async def test_a_link_planted_at_a_parent_after_the_check_is_not_written_through(
        self, ws: Path, team_dir: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def checked_then_raced(
            default: Path, roots: tuple[Path, ...], path: str
        ) -> tuple[Path, Path]:
            root, target = resolve_in_roots(default, roots, path)
            target.parent.symlink_to(outside)
            return root, target

        monkeypatch.setattr(files_module, "resolve_in_roots", checked_then_raced)
        with pytest.raises(ToolError, match="access denied"):
            await run(WRITE_FILE, ws, (team_dir,), path=f"{team_dir}/sub/x.txt", content="esc")
        assert names(outside) == ["secret.txt"]

    async def test_the_root_itself_is_not_a_file(self, ws: Path, team_dir: Path) -> None:
        with pytest.raises(ToolError, match="not the workspace itself"):
            await run(WRITE_FILE, ws, (team_dir,), path=str(team_dir), content="x")


class TestListing:
    async def test_an_absolute_folder_lists_absolute_paths(self, ws: Path, team_dir: Path) -> None:
        (team_dir / "a.txt").write_text("a")
        (team_dir / "sub").mkdir()
        out = await run(LIST_FILES, ws, (team_dir,), path=str(team_dir))
        assert out.splitlines() == [f"{team_dir}/a.txt", f"{team_dir}/sub/"]

    async def test_a_relative_folder_lists_relative_paths(self, ws: Path, team_dir: Path) -> None:
        (ws / "sub").mkdir()
        (ws / "sub" / "b.txt").write_text("b")
        assert await run(LIST_FILES, ws, (team_dir,), path="sub") == "sub/b.txt"

    async def test_a_missing_extra_root_lists_as_empty(self, ws: Path, tmp_path: Path) -> None:
        missing = (tmp_path / "not-yet").resolve()
        assert await run(LIST_FILES, ws, (missing,), path=str(missing)) == "(empty)"
        assert "no such directory" in await run(
            LIST_FILES, ws, (missing,), path=str(missing / "sub")
        )


class TestQuotaPerRoot:
    async def test_a_write_counts_against_the_root_that_holds_it(
        self, ws: Path, team_dir: Path
    ) -> None:
        (ws / "full.txt").write_text("x" * 8)
        # 8 bytes in ws + 5 would be over 10; the team folder is empty: allowed there.
        await run(WRITE_FILE, ws, (team_dir,), quota=10, path=f"{team_dir}/a.txt", content="y" * 5)
        assert (team_dir / "a.txt").read_text() == "yyyyy"
        with pytest.raises(ToolError, match="quota exceeded: 5 of 10"):
            await run(
                WRITE_FILE, ws, (team_dir,), quota=10, path=f"{team_dir}/b.txt", content="z" * 6
            )
        with pytest.raises(ToolError, match="quota exceeded: 8 of 10"):
            await run(WRITE_FILE, ws, (team_dir,), quota=10, path="b.txt", content="z" * 3)


class TestResolveInRoots:
    def test_relative_means_the_default_and_absolute_picks_its_root(
        self, ws: Path, team_dir: Path
    ) -> None:
        assert resolve_in_roots(ws, (team_dir,), "a/b") == (ws, ws / "a" / "b")
        assert resolve_in_roots(ws, (team_dir,), str(team_dir / "c")) == (team_dir, team_dir / "c")

    def test_the_default_wins_when_roots_nest(self, ws: Path, tmp_path: Path) -> None:
        outer = tmp_path.resolve()
        assert resolve_in_roots(ws, (outer,), str(ws / "x")) == (ws, ws / "x")
        assert resolve_in_roots(ws, (outer,), str(outer / "y")) == (outer, outer / "y")

    @pytest.mark.parametrize("path", ["/etc/passwd", "../x", "/x\x00"])
    def test_escapes_raise(self, ws: Path, team_dir: Path, path: str) -> None:
        with pytest.raises(WorkspaceEscape):
            resolve_in_roots(ws, (team_dir,), path)


# -- where a team's workspace is ------------------------------------------------------------


def make_team(*, shared: bool = False, scope: WorkspaceScope = WorkspaceScope.CHAT) -> Team:
    return Team("t1", "lead", ("m1", "m2"), TeamSettings(shared, scope))


class TestTeamWorkspace:
    def test_shared_mode_is_one_folder_for_the_team(self, tmp_path: Path) -> None:
        team = make_team(shared=True)
        a = team_workspace(tmp_path, team, chat_id="telegram:1", user_id="u1")
        b = team_workspace(tmp_path, team, chat_id="slack:2", user_id="u2")
        assert a == b == (tmp_path / "_teams" / "t1" / "shared").resolve()

    def test_isolated_chat_scope_is_one_folder_per_chat(self, tmp_path: Path) -> None:
        team = make_team()
        a = team_workspace(tmp_path, team, chat_id="telegram:1", user_id="u1")
        assert a == (tmp_path / "_teams" / "t1" / "chat" / sanitize_user_id("telegram:1")).resolve()
        assert team_workspace(tmp_path, team, chat_id="telegram:1", user_id="u2") == a
        assert team_workspace(tmp_path, team, chat_id="telegram:2", user_id="u1") != a

    def test_isolated_user_scope_is_one_folder_per_user(self, tmp_path: Path) -> None:
        team = make_team(scope=WorkspaceScope.USER)
        a = team_workspace(tmp_path, team, chat_id="telegram:1", user_id="u1")
        assert a == (tmp_path / "_teams" / "t1" / "user" / "u1").resolve()
        assert team_workspace(tmp_path, team, chat_id="telegram:2", user_id="u1") == a
        assert team_workspace(tmp_path, team, chat_id="telegram:1", user_id="u2") != a

    def test_chat_scope_without_a_chat_falls_back_to_the_user(self, tmp_path: Path) -> None:
        got = team_workspace(tmp_path, make_team(), chat_id="", user_id="u1")
        assert got == (tmp_path / "_teams" / "t1" / "user" / "u1").resolve()

    @pytest.mark.parametrize("hostile", ["../../etc", "..", "/abs", "a/../../b", "x\x00y"])
    def test_hostile_ids_stay_under_the_teams_folder(self, tmp_path: Path, hostile: str) -> None:
        teams = (tmp_path / "_teams").resolve()
        team = Team(hostile, "lead")
        for got in (
            team_workspace(tmp_path, team, chat_id=hostile, user_id=hostile),
            team_workspace(tmp_path, team, chat_id="", user_id=hostile),
        ):
            assert got.is_absolute() and teams in got.parents
            assert len(got.relative_to(teams).parts) == 3


# -- which workspace a run works in ---------------------------------------------------------


def settings_of(base: Path, agent_id: str, team: Team | None) -> AgentSettings:
    return AgentSettings(
        id=agent_id, model="m", workspace=base, orchestration=resolve_profile(agent_id, team, [])
    )


def request_of(agent_id: str, **kw: Any) -> RunRequest:
    return RunRequest("agent:x", "hi", "u1", agent_id=agent_id, chat_id="telegram:9", **kw)


class TestResolveRunWorkspace:
    def test_an_agent_without_a_team_works_in_its_own_workspace(self, tmp_path: Path) -> None:
        got = resolve_run_workspace(settings_of(tmp_path, "solo", None), request_of("solo"))
        assert got == RunWorkspace(user_workspace(tmp_path, "u1"), (), None)

    def test_the_lead_defaults_to_the_team_workspace(self, tmp_path: Path) -> None:
        team = make_team()
        shared = team_workspace(tmp_path, team, chat_id="telegram:9", user_id="u1")
        got = resolve_run_workspace(settings_of(tmp_path, "lead", team), request_of("lead"))
        assert got == RunWorkspace(shared, (user_workspace(tmp_path, "u1"),), shared)

    def test_a_member_keeps_its_own_workspace_and_reaches_the_team(self, tmp_path: Path) -> None:
        team = make_team()
        shared = team_workspace(tmp_path, team, chat_id="telegram:9", user_id="u1")
        got = resolve_run_workspace(settings_of(tmp_path, "m1", team), request_of("m1"))
        assert got == RunWorkspace(user_workspace(tmp_path, "u1"), (shared,), shared)

    def test_a_dispatched_task_works_in_the_given_team_workspace(self, tmp_path: Path) -> None:
        given, own = (tmp_path / "given").resolve(), (tmp_path / "own").resolve()
        req = request_of("m1", workspace=given, extra_roots=(own,), team_task_id="task-1")
        got = resolve_run_workspace(settings_of(tmp_path, "m1", make_team()), req)
        assert got == RunWorkspace(given, (own,), given)

    def test_a_delegation_works_in_the_given_folder_without_a_team(self, tmp_path: Path) -> None:
        given = (tmp_path / "parent" / "delegations" / "d1").resolve()
        req = request_of("m1", workspace=given)
        got = resolve_run_workspace(settings_of(tmp_path, "m1", make_team()), req)
        assert got == RunWorkspace(given, (), None)


# -- delegation folders ---------------------------------------------------------------------


def delegate(ws: Path, *files: str, max_bytes: int = 1 << 20, task_id: str = "d1") -> Path:
    return prepare_delegation(ws, task_id, files, max_bytes=max_bytes)


class TestPrepareDelegation:
    def test_copies_the_files_into_inputs_and_creates_outputs(self, ws: Path) -> None:
        (ws / "a.txt").write_text("alpha")
        (ws / "sub").mkdir()
        (ws / "sub" / "b.md").write_text("beta")
        folder = delegate(ws, "a.txt", "sub/b.md")
        assert folder == ws / "delegations" / "d1"
        assert (folder / "inputs" / "a.txt").read_text() == "alpha"
        assert (folder / "inputs" / "b.md").read_text() == "beta"
        assert (folder / "outputs").is_dir() and not list((folder / "outputs").iterdir())
        assert (ws / "sub" / "b.md").read_text() == "beta"  # a copy, not a move

    async def test_runs_in_a_thread_without_files(self, ws: Path) -> None:
        folder = await asyncio.to_thread(delegate, ws)
        assert sorted(p.name for p in folder.iterdir()) == ["inputs", "outputs"]

    def test_a_hostile_task_id_stays_under_delegations(self, ws: Path) -> None:
        folder = delegate(ws, task_id="../../x")
        assert folder.parent == ws / "delegations"

    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("../outside/secret.txt", "outside the workspace"),
            ("/etc/passwd", "relative to your workspace"),
            ("", "relative to your workspace"),
            ("missing.txt", "no such file"),
            ("sub", "not a regular file"),
            ("a\x00.txt", "NUL"),
        ],
    )
    def test_refuses_what_cannot_be_passed(
        self, ws: Path, outside: Path, path: str, reason: str
    ) -> None:
        (ws / "sub").mkdir()
        with pytest.raises(ToolError, match=reason) as info:
            delegate(ws, path)
        assert info.value.tool_name == "delegate" and repr(path) in str(info.value)
        assert not (ws / "delegations").exists()  # checked before anything is created

    @pytest.mark.parametrize("link", ["out-link.txt", "in-link.txt", "alias/a.txt"])
    def test_refuses_symbolic_links(self, ws: Path, outside: Path, link: str) -> None:
        (ws / "a.txt").write_text("alpha")
        (ws / "out-link.txt").symlink_to(outside / "secret.txt")
        (ws / "in-link.txt").symlink_to(ws / "a.txt")
        (ws / "alias").symlink_to(ws)
        with pytest.raises(ToolError, match=r"symbolic link|outside the workspace") as info:
            delegate(ws, link)
        assert repr(link) in str(info.value)
        assert not (ws / "delegations").exists()

    def test_refuses_files_over_the_limit_naming_the_one_that_tips_it(self, ws: Path) -> None:
        (ws / "a.txt").write_text("x" * 6)
        (ws / "b.txt").write_text("y" * 5)
        assert (delegate(ws, "a.txt", "b.txt", max_bytes=11) / "inputs" / "b.txt").exists()
        with pytest.raises(ToolError, match=r"cannot pass 'b.txt'.*11 bytes.*limit of 10"):
            delegate(ws, "a.txt", "b.txt", max_bytes=10, task_id="d2")
        assert not (ws / "delegations" / "d2").exists()

    def test_refuses_two_files_with_one_base_name(self, ws: Path) -> None:
        for d in ("x", "y"):
            (ws / d).mkdir()
            (ws / d / "same.txt").write_text(d)
        with pytest.raises(ToolError, match=r"'y/same.txt'.*another file named 'same.txt'"):
            delegate(ws, "x/same.txt", "y/same.txt")

    def test_a_planted_delegations_link_creates_nothing_outside(
        self, ws: Path, outside: Path
    ) -> None:
        (ws / "a.txt").write_text("alpha")
        (ws / "delegations").symlink_to(outside)
        with pytest.raises(ToolError, match="access denied"):
            delegate(ws, "a.txt")
        assert names(outside) == ["secret.txt"]
