"""agent_core/run_tools.py: the ToolContext a run's tool calls get: its workspace and roots,
the run's ids and quotas, the shared discovered set and the skills' read-only folders."""

from __future__ import annotations

from pathlib import Path

from agent_core import AgentSettings, RunRequest
from agent_core.orchestration.workspaces import RunWorkspace
from agent_core.run_state import RunState
from agent_core.run_tools import run_tool_context
from agent_core.skills import Skill
from agent_core.tracing import new_trace
from agent_core.workspace import user_workspace


def settings(tmp_path: Path, **kw: object) -> AgentSettings:
    return AgentSettings(id="helper", model="m", workspace=tmp_path / "ws", **kw)  # type: ignore[arg-type]


def state(request: RunRequest, **kw: object) -> RunState:
    trace = new_trace(request.run_id, request.session_key, request.agent_id)
    return RunState(request=request, trace=trace, messages=[], **kw)  # type: ignore[arg-type]


def skill(tmp_path: Path, name: str, *, shared: bool) -> Skill:
    folder = tmp_path / name
    return Skill(name, "d", folder / "SKILL.md", folder, shared)


def test_the_context_carries_the_runs_ids_and_the_agents_quotas(tmp_path: Path) -> None:
    agent = settings(tmp_path, max_file_bytes=123, workspace_max_bytes=4567)
    request = RunRequest("sess", "hi", "alice", agent_id="helper")
    run = state(request)
    ctx = run_tool_context(agent, run)
    assert (ctx.session_key, ctx.user_id, ctx.agent_id, ctx.run_id) == (
        "sess",
        "alice",
        "helper",
        request.run_id,
    )
    assert ctx.request is request and ctx.trace_id == run.trace.id
    assert (ctx.max_file_bytes, ctx.workspace_max_bytes) == (123, 4567)


def test_without_a_prepared_place_the_users_workspace_is_resolved(tmp_path: Path) -> None:
    agent = settings(tmp_path)
    ctx = run_tool_context(agent, state(RunRequest("s", "hi", "alice")))
    assert ctx.workspace == user_workspace(agent.workspace, "alice")
    assert ctx.extra_roots == ()


def test_the_runs_own_place_wins(tmp_path: Path) -> None:
    place = RunWorkspace(tmp_path / "team", (tmp_path / "own",), tmp_path / "team")
    ctx = run_tool_context(settings(tmp_path), state(RunRequest("s", "hi", "u"), place=place))
    assert ctx.workspace == tmp_path / "team"
    assert ctx.extra_roots == (tmp_path / "own",)


def test_a_delegated_runs_workspace_comes_from_its_request(tmp_path: Path) -> None:
    folder = tmp_path / "delegations" / "t1"
    request = RunRequest("s", "hi", "u", workspace=folder, extra_roots=(tmp_path / "x",))
    ctx = run_tool_context(settings(tmp_path), state(request))
    assert ctx.workspace == folder.resolve()
    assert ctx.extra_roots == ((tmp_path / "x").resolve(),)


def test_discoveries_are_shared_with_the_run(tmp_path: Path) -> None:
    run = state(RunRequest("s", "hi", "u"))
    ctx = run_tool_context(settings(tmp_path), run)
    ctx.discovered.add("mcp_tool")  # what a search tool does during the batch
    assert run.discovered == {"mcp_tool"}


def test_only_shared_skills_become_read_roots(tmp_path: Path) -> None:
    mine, shared = skill(tmp_path, "mine", shared=False), skill(tmp_path, "lib", shared=True)
    ctx = run_tool_context(
        settings(tmp_path), state(RunRequest("s", "hi", "u"), skills=(mine, shared))
    )
    assert ctx.skills == (mine, shared)
    assert ctx.read_roots == (tmp_path / "lib",)
