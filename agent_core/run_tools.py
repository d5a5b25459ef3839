"""The :class:`ToolContext` a run's tool calls get: where they work, what they may reach, the
run's quotas and skills (``agent_core/loop.py`` builds one per tool batch)."""

from __future__ import annotations

from agent_core.orchestration.workspaces import resolve_run_workspace
from agent_core.run_state import RunState
from agent_core.settings import AgentSettings
from agent_core.skills import shared_folders
from agent_core.tools.base import ToolContext


def run_tool_context(settings: AgentSettings, state: RunState) -> ToolContext:
    request = state.request
    place = state.place or resolve_run_workspace(settings, request)
    return ToolContext(
        workspace=place.default,
        extra_roots=place.extra_roots,
        request=request,
        trace_id=state.trace.id,
        session_key=request.session_key,
        user_id=request.user_id,
        agent_id=settings.id,
        run_id=request.run_id,
        max_file_bytes=settings.max_file_bytes,
        workspace_max_bytes=settings.workspace_max_bytes,
        discovered=state.discovered,
        skills=state.skills,
        read_roots=shared_folders(state.skills),  # a shared skill is read where it lies
    )
