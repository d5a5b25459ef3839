"""agent_core/orchestration/mode_tools.py: which orchestration tools an agent gets in its mode;
the others are hidden with a reason the model reads when it calls one anyway."""

from __future__ import annotations

from pathlib import Path

from agent_core import AgentSettings, EventBus, Loop
from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.memory_store import MemoryOrchestrationStore
from agent_core.orchestration.mode_tools import add_mode_tools
from agent_core.orchestration.modes import (
    DELEGATE,
    SPAWN,
    TEAM_TASKS,
    DelegateTarget,
    OrchestrationMode,
    OrchestrationProfile,
)
from agent_core.orchestration.records import Team
from agent_core.tools.base import ToolRegistry

TEAM = Team("crew", lead="main", members=("helper",))


def settings(tmp_path: Path, profile: OrchestrationProfile, **kw: object) -> AgentSettings:
    return AgentSettings(
        id="main",
        model="m",
        workspace=tmp_path,
        orchestration=profile,
        **kw,  # type: ignore[arg-type]
    )


def tools_for(agent: AgentSettings, tasks: MemoryOrchestrationStore | None = None) -> ToolRegistry:
    async def resolve(agent_id: str) -> Loop:
        raise AssertionError("no run starts while tools are registered")

    registry = ToolRegistry()
    add_mode_tools(registry, agent, Orchestrator(resolve, EventBus()), tasks)
    return registry


def test_spawn_mode_offers_spawn_and_explains_the_rest(tmp_path: Path) -> None:
    tools = tools_for(settings(tmp_path, OrchestrationProfile()))
    assert sorted(tools.tools) == [SPAWN]
    assert "agent link" in tools.hidden[DELEGATE]
    assert "only for team agents" in tools.hidden[TEAM_TASKS]


def test_delegate_mode_adds_delegate(tmp_path: Path) -> None:
    profile = OrchestrationProfile(OrchestrationMode.DELEGATE, targets=(DelegateTarget("b"),))
    tools = tools_for(settings(tmp_path, profile))
    assert sorted(tools.tools) == [DELEGATE, SPAWN]
    assert set(tools.hidden) == {TEAM_TASKS}


def test_team_mode_offers_all_three(tmp_path: Path) -> None:
    profile = OrchestrationProfile(OrchestrationMode.TEAM, TEAM)
    tools = tools_for(settings(tmp_path, profile), MemoryOrchestrationStore(teams=[TEAM]))
    assert sorted(tools.tools) == [DELEGATE, SPAWN, TEAM_TASKS]
    assert tools.hidden == {}


def test_team_tasks_without_a_task_store_is_hidden_with_the_reason(tmp_path: Path) -> None:
    profile = OrchestrationProfile(OrchestrationMode.TEAM, TEAM)
    tools = tools_for(settings(tmp_path, profile), None)
    assert sorted(tools.tools) == [DELEGATE, SPAWN]
    assert tools.hidden == {TEAM_TASKS: "team tasks need the database"}


def test_a_spawn_depth_of_zero_hides_spawn(tmp_path: Path) -> None:
    tools = tools_for(settings(tmp_path, OrchestrationProfile(), max_spawn_depth=0))
    assert SPAWN not in tools
    assert "max_spawn_depth: 0" in tools.hidden[SPAWN]


def test_a_registry_that_offered_a_tool_loses_it_in_a_narrower_mode(tmp_path: Path) -> None:
    # An agent's registry is cloned from a shared one that may list every tool.
    team = tools_for(
        settings(tmp_path, OrchestrationProfile(OrchestrationMode.TEAM, TEAM)),
        MemoryOrchestrationStore(teams=[TEAM]),
    )
    narrowed = team.clone()

    async def resolve(agent_id: str) -> Loop:
        raise AssertionError("unused")

    add_mode_tools(
        narrowed,
        settings(tmp_path, OrchestrationProfile()),
        Orchestrator(resolve, EventBus()),
        None,
    )
    assert sorted(narrowed.tools) == [SPAWN]
    assert set(narrowed.hidden) == {DELEGATE, TEAM_TASKS}
