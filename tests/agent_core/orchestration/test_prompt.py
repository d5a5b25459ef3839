"""System prompt for orchestration (agent-loop spec section 2): the team workspace section (13),
extra context in minimal mode (18) and the sub-agent section (20) for spawn, delegate and team
modes, skipped for team agents with a TEAM.md."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_core.bootstrap import ContextFile, PromptMode, Workspaces
from agent_core.orchestration.modes import resolve_profile
from agent_core.orchestration.records import AgentLink, Team, TeamSettings, WorkspaceScope
from agent_core.prompt import SECTIONS, PromptContext, build_system_prompt, render_sections
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings
from agent_core.tools.base import Tool, ToolContext, ToolRegistry
from agent_core.tools.files import FILE_TOOLS
from agent_core.workspace import user_workspace

NOW = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
TEAM = Team("t1", "lead", ("m1", "m2"))


async def _noop(args: dict[str, Any], ctx: ToolContext) -> str:
    return ""


def tools(*names: str) -> ToolRegistry:
    extra = [Tool(n, f"the {n} tool", {"type": "object"}, _noop) for n in names]
    return ToolRegistry.of([*FILE_TOOLS, *extra])


def settings_of(
    base: Path, agent_id: str = "main", team: Team | None = None, links: tuple[AgentLink, ...] = ()
) -> AgentSettings:
    profile = resolve_profile(agent_id, team, links)
    return AgentSettings(id=agent_id, model="m", workspace=base, orchestration=profile)


def make(
    settings: AgentSettings,
    registry: ToolRegistry,
    *,
    cwd: Path,
    team_workspace: Path | None = None,
    mode: PromptMode = PromptMode.FULL,
    files: tuple[ContextFile, ...] = (),
    extra: str = "",
    **request: Any,
) -> PromptContext:
    request.setdefault("chat_id", "telegram:9")
    req = RunRequest("agent:x", "hi", "u1", agent_id=settings.id, **request)
    return PromptContext(
        settings,
        req,
        registry,
        cwd,
        NOW,
        mode=mode,
        files=files,
        extra_context=extra,
        team_workspace=team_workspace,
    )


def sections(c: PromptContext) -> dict[str, str]:
    return dict(render_sections(c))


def team_md(tmp_path: Path) -> ContextFile:
    return ContextFile("TEAM.md", "# How our team works", tmp_path / "TEAM.md")


class TestOrder:
    def test_team_workspace_comes_right_after_workspace(self) -> None:
        order = [s.__name__ for s in SECTIONS]
        assert order[order.index("workspace") + 1] == "team_workspace"
        assert order.index("extra_context") < order.index("subagent_spawning")


class TestTeamWorkspaceSection:
    def test_absent_without_a_team(self, tmp_path: Path) -> None:
        c = make(settings_of(tmp_path), tools("spawn"), cwd=tmp_path / "u1")
        assert "team_workspace" not in sections(c)

    def test_the_lead_works_in_the_team_workspace(self, tmp_path: Path) -> None:
        shared = (tmp_path / "_teams" / "t1" / "chat" / "x").resolve()
        c = make(
            settings_of(tmp_path, "lead", TEAM),
            tools(),
            cwd=shared,
            team_workspace=shared,
        )
        text = sections(c)["team_workspace"]
        assert text.startswith("## Team workspace\n")
        assert "You are the lead of team t1 (lead: lead; members: m1, m2)." in text
        assert f"The team workspace for this chat is {shared} (an absolute path)." in text
        assert "It is your default workspace: relative paths mean it." in text
        assert f"Your own workspace is {user_workspace(tmp_path, 'u1')}" in text

    def test_a_member_reaches_the_team_by_absolute_path(self, tmp_path: Path) -> None:
        own = user_workspace(tmp_path, "u1")
        shared = (tmp_path / "_teams" / "t1" / "shared").resolve()
        team = Team("t1", "lead", ("m1",), TeamSettings(shared_workspace=True))
        c = make(settings_of(tmp_path, "m1", team), tools(), cwd=own, team_workspace=shared)
        text = sections(c)["team_workspace"]
        assert "You are a member of team t1" in text
        assert f"The team workspace shared by the whole team is {shared}" in text
        assert f"Relative paths still mean your default workspace ({own})" in text
        assert str(shared / "notes.md") in text
        assert "It is your default workspace" not in text

    def test_user_scope_and_a_chat_scope_without_a_chat_say_per_user(self, tmp_path: Path) -> None:
        shared = (tmp_path / "team").resolve()
        team = Team("t1", "lead", ("m1",), TeamSettings(workspace_scope=WorkspaceScope.USER))
        for t, chat in ((team, "telegram:9"), (TEAM, "")):
            c = make(
                settings_of(tmp_path, "m1", t),
                tools(),
                cwd=tmp_path,
                team_workspace=shared,
                chat_id=chat,
            )
            assert f"The team workspace for this user is {shared}" in sections(c)["team_workspace"]

    def test_a_dispatched_task_names_the_task_and_its_workspace(self, tmp_path: Path) -> None:
        shared = (tmp_path / "team").resolve()
        c = make(
            settings_of(tmp_path, "m1"),  # no team known to its settings: still shown
            tools(),
            cwd=shared,
            team_workspace=shared,
            mode=PromptMode.MINIMAL,
            workspace=shared,
            team_task_id="task-7",
        )
        text = sections(c)["team_workspace"]
        assert "You are working on team task task-7." in text
        assert f"The team workspace is {shared}" in text
        assert "relative paths mean it" in text
        assert "Your own workspace" not in text  # not reachable in a dispatched run

    def test_build_system_prompt_passes_the_team_workspace(self, tmp_path: Path) -> None:
        shared = (tmp_path / "team").resolve()
        s = settings_of(tmp_path, "m1", TEAM)
        req = RunRequest("agent:x", "hi", "u1", agent_id="m1")
        prompt = build_system_prompt(
            s, req, tools(), tmp_path, now=NOW, skill_list=(), team_workspace=shared
        )
        assert f"The team workspace for this user is {shared}" in prompt


class TestSubAgentSection:
    def test_spawn_mode_explains_wait_background_and_parallel(self, tmp_path: Path) -> None:
        c = make(settings_of(tmp_path), tools("spawn"), cwd=tmp_path)
        text = sections(c)["subagent_spawning"]
        assert text.startswith("## Sub-agents\n")
        assert "complete brief" in text
        assert "wait true you get its result as the tool result" in text
        assert "wait false it runs in the background" in text
        assert "comes back later as a new message" in text
        assert "run in parallel" in text
        assert "delegate" not in text and "team_tasks" not in text

    def test_absent_without_orchestration_tools(self, tmp_path: Path) -> None:
        c = make(settings_of(tmp_path), tools(), cwd=tmp_path)
        assert "subagent_spawning" not in sections(c)

    def test_delegate_mode_lists_targets_and_the_file_flow(self, tmp_path: Path) -> None:
        links = (
            AgentLink("main", "research", description="papers and sources"),
            AgentLink("main", "coder"),
        )
        c = make(settings_of(tmp_path, links=links), tools("spawn", "delegate"), cwd=tmp_path)
        text = sections(c)["subagent_spawning"]
        assert "- research: papers and sources\n- coder: no description" in text
        assert "files you list in its files argument" in text and "inputs/" in text
        assert "delegations/<task_id>/outputs/" in text
        assert "wait false" in text  # spawn is explained too
        assert "team_tasks" not in text

    def test_team_mode_explains_team_tasks(self, tmp_path: Path) -> None:
        c = make(
            settings_of(tmp_path, "lead", TEAM),
            tools("spawn", "delegate", "team_tasks"),
            cwd=tmp_path,
        )
        text = sections(c)["subagent_spawning"]
        assert "Team t1: lead lead; members m1, m2." in text
        assert "create with an assignee dispatches the task to that member" in text
        assert "list and get collect the results" in text
        assert "claim, complete and comment are for the tasks given to you" in text
        assert "- m1: member of team t1" in text  # team mates are delegate targets

    def test_skipped_for_a_team_agent_with_team_md(self, tmp_path: Path) -> None:
        c = make(
            settings_of(tmp_path, "lead", TEAM),
            tools("spawn", "delegate", "team_tasks"),
            cwd=tmp_path,
            files=(team_md(tmp_path),),
        )
        got = sections(c)
        assert "subagent_spawning" not in got
        assert '<file name="TEAM.md">\n# How our team works\n</file>' in got["project_context"]

    def test_kept_for_an_agent_outside_a_team_with_team_md(self, tmp_path: Path) -> None:
        c = make(settings_of(tmp_path), tools("spawn"), cwd=tmp_path, files=(team_md(tmp_path),))
        assert "subagent_spawning" in sections(c)

    def test_team_md_in_the_workspace_is_a_context_file(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "lead")
        spaces.ensure_user_files("u1")
        (spaces.user_dir("u1") / "TEAM.md").write_text("# Team rules")
        files = tuple(spaces.context_files("u1", PromptMode.FULL))
        c = make(
            settings_of(tmp_path, "lead", TEAM),
            tools("spawn", "team_tasks"),
            cwd=spaces.user_dir("u1"),
            files=files,
        )
        got = sections(c)
        assert "# Team rules" in got["project_context"] and "subagent_spawning" not in got


class TestMinimalMode:
    def test_a_child_keeps_extra_context_and_a_short_spawn_section(self, tmp_path: Path) -> None:
        c = make(
            settings_of(tmp_path),
            tools("spawn"),
            cwd=tmp_path,
            mode=PromptMode.MINIMAL,
            extra="Parent's brief: summarise the report.",
            depth=1,
        )
        got = sections(c)
        assert list(got) == [
            "identity", "tooling", "safety", "workspace", "time_section", "extra_context",
            "subagent_spawning", "runtime",
        ]  # fmt: skip
        assert got["extra_context"] == (
            "<extra_context>\nParent's brief: summarise the report.\n</extra_context>"
        )
        assert "complete brief" in got["subagent_spawning"]
        assert "run in parallel" in got["subagent_spawning"]
        assert "background" not in got["subagent_spawning"]  # children wait for theirs

    def test_a_dispatched_member_gets_short_team_and_delegate_notes(self, tmp_path: Path) -> None:
        shared = (tmp_path / "team").resolve()
        c = make(
            settings_of(tmp_path, "m1", TEAM),
            tools("spawn", "delegate", "team_tasks"),
            cwd=shared,
            team_workspace=shared,
            mode=PromptMode.MINIMAL,
            extra="You work in team t1 (lead lead).",
            team_task_id="task-1",
        )
        got = sections(c)
        assert "team_workspace" in got and "extra_context" in got
        text = got["subagent_spawning"]
        assert "You may delegate to: lead, m2" in text
        assert "Use team_tasks to claim, complete and comment" in text
        assert "create with an assignee" not in text
