"""The :class:`ToolContext` a run's tool calls get: where they work, what they may reach, the
run's quotas and skills (``agent_core/loop.py`` builds one per tool batch); and each call's span
on the run's trace."""

from __future__ import annotations

from agent_core.orchestration.workspaces import resolve_run_workspace
from agent_core.run_state import RunState
from agent_core.settings import AgentSettings
from agent_core.skills import shared_folders
from agent_core.tool_exec import ToolOutcome
from agent_core.tools.base import ToolContext, ToolKind, ToolRegistry
from agent_core.tracing import SpanKind, Trace, arguments_digest, tool_span_id


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


def record_tool_span(trace: Trace, tools: ToolRegistry, outcome: ToolOutcome) -> None:
    """The finished call's span: its timing, whether it failed or was blocked, its arguments'
    digest."""
    tool = tools.get(outcome.call.name)
    # Tools that start other runs are tracked apart (spec), under the id their child
    # traces link to.
    orchestrates = tool is not None and tool.kind is ToolKind.ORCHESTRATE
    kind = SpanKind.ASYNC_TOOL if orchestrates else SpanKind.TOOL
    span = trace.start_span(kind, outcome.call.name, id=outcome.call.id)
    span.id = tool_span_id(trace.id, outcome.call.id)
    span.started_at = outcome.started_at
    span.duration_ms = outcome.duration_ms
    span.error = outcome.is_error
    span.attributes["args_hash"] = arguments_digest(outcome.call.arguments)
    if outcome.blocked:
        span.attributes["blocked"] = True
