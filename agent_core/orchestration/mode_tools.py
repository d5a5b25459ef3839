"""An agent's orchestration tools for its mode: offered ones registered, the others hidden
(a call to a hidden tool is refused with the reason, ``agent_core/tool_exec.py``)."""

from __future__ import annotations

from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.modes import DELEGATE, SPAWN, TEAM_TASKS
from agent_core.orchestration.records import TaskStore
from agent_core.orchestration.team_tasks import team_tasks_tool
from agent_core.orchestration.tools import delegate_tool, spawn_tool
from agent_core.settings import AgentSettings
from agent_core.tools.base import ToolRegistry


def add_mode_tools(
    tools: ToolRegistry,
    settings: AgentSettings,
    orchestrator: Orchestrator,
    tasks: TaskStore | None,
) -> None:
    profile = settings.orchestration
    tools.register(spawn_tool(orchestrator, settings))
    for name in (DELEGATE, TEAM_TASKS):
        reason = profile.hidden_reason(name)
        if reason is not None:
            tools.hide(name, reason)
    if DELEGATE in profile.visible_tools:
        tools.register(delegate_tool(orchestrator, settings))
    if TEAM_TASKS in profile.visible_tools:
        if tasks is None:
            tools.hide(TEAM_TASKS, "team tasks need the database")
        else:
            tools.register(team_tasks_tool(orchestrator, settings, tasks))
    if settings.max_spawn_depth == 0:
        tools.hide(SPAWN, "spawning is disabled (agents.defaults.max_spawn_depth: 0)")
