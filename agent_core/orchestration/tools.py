"""The ``spawn`` and ``delegate`` tools (agent-loop spec, orchestration modes).

``spawn`` starts a child run of the calling agent itself, with the Minimal prompt and the
parent's brief in ``<extra_context>``. ``delegate`` hands a task to another agent over an
``agent_links`` edge; the delegated run works in a fresh ``delegations/<task_id>/`` folder of the
caller's workspace and sees only its ``inputs/`` (files the caller passed) and ``outputs/``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import agent_core.orchestration.arguments as arg
from agent_core.errors import ToolError
from agent_core.orchestration.children import ChildRun, Orchestrator, new_task_id
from agent_core.orchestration.modes import DELEGATE, SPAWN
from agent_core.orchestration.workspaces import prepare_delegation
from agent_core.run import RunResult, RunStatus, is_no_reply
from agent_core.settings import AgentSettings
from agent_core.tools.base import Tool, ToolContext, ToolKind

MAX_OUTPUT_LISTING = 50


def render_result(child: ChildRun, result: RunResult | None) -> str:
    """A child's result as the parent's tool result (a ToolError when it did not succeed)."""
    if result is None:
        return (
            f"Started background task {child.task_id} ({child.kind}, agent {child.agent_id}). "
            "Its result will arrive in this chat as a new message when it is done; don't wait "
            "for it: carry on or tell the user it is running."
        )
    if result.status is RunStatus.CANCELLED:
        raise ToolError(child.kind, f"task {child.task_id} was stopped before it finished")
    if result.status is RunStatus.FAILED:
        raise ToolError(child.kind, f"task {child.task_id} failed: {result.error or 'unknown'}")
    content = "(no answer)" if is_no_reply(result.content) else result.content
    return f"[task {child.task_id} · {child.agent_id} · {result.status}]\n{content}"


def spawn_tool(orchestrator: Orchestrator, settings: AgentSettings) -> Tool:
    async def spawn(args: dict[str, Any], ctx: ToolContext) -> str:
        task = arg.text(args, SPAWN, "task")
        context = arg.text(args, SPAWN, "context", required=False)
        wait = arg.flag(args, SPAWN, "wait", True)
        parent = orchestrator.check_limits(ctx, settings, SPAWN)
        loop = await orchestrator.resolve(settings.id)
        task_id = new_task_id()
        brief = (
            f"You are a sub-agent of {settings.id}, started for one task (task {task_id}). "
            "Do it completely and answer with the result only: your answer goes back to the "
            "agent that started you, not to a user."
        )
        request = orchestrator.child_request(
            ctx,
            parent,
            kind=SPAWN,
            task_id=task_id,
            agent_id=settings.id,
            message=task,
            extra_context="\n\n".join(p for p in (brief, context) if p),
            # The child works where its parent does (a team task's workspace included).
            workspace=ctx.workspace,
            extra_roots=ctx.extra_roots,
        )
        child, result = await orchestrator.start(
            loop, parent, request, kind=SPAWN, task_id=task_id, wait=wait
        )
        return render_result(child, result)

    return Tool(
        name=SPAWN,
        description=(
            "Start a sub-agent (a copy of you with a short prompt) on one independent task. "
            "Several spawn calls in one turn run in parallel."
        ),
        parameters={
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The complete brief of the task."},
                "context": {
                    "type": "string",
                    "description": "Background the sub-agent needs (facts, constraints).",
                },
                "wait": arg.WAIT_SCHEMA,
            },
            "required": ["task"],
        },
        handler=spawn,
        kind=ToolKind.ORCHESTRATE,
    )


def delegate_tool(orchestrator: Orchestrator, settings: AgentSettings) -> Tool:
    profile = settings.orchestration

    async def delegate(args: dict[str, Any], ctx: ToolContext) -> str:
        target = arg.text(args, DELEGATE, "agent")
        task = arg.text(args, DELEGATE, "task")
        files = arg.strings(args, DELEGATE, "files")
        wait = arg.flag(args, DELEGATE, "wait", True)
        if not profile.may_delegate_to(target):
            allowed = ", ".join(t.agent_id for t in profile.targets) or "none"
            raise ToolError(
                DELEGATE,
                f"no agent link allows {settings.id} to delegate to {target!r} "
                f"(allowed: {allowed})",
            )
        parent = orchestrator.check_limits(ctx, settings, DELEGATE)
        try:
            loop = await orchestrator.resolve(target)
        except LookupError as exc:  # the linked agent was deleted since
            raise ToolError(DELEGATE, f"agent {target!r} is not available: {exc}") from exc
        task_id = new_task_id()
        folder = await asyncio.to_thread(
            prepare_delegation, ctx.workspace, task_id, files, max_bytes=ctx.max_file_bytes
        )
        brief = (
            f"Agent {settings.id} delegated this task to you (task {task_id}). Your workspace "
            "holds only inputs/ (files it gave you) and outputs/: write files meant for it to "
            "outputs/. Answer with the result; your answer goes back to that agent."
        )
        request = orchestrator.child_request(
            ctx,
            parent,
            kind=DELEGATE,
            task_id=task_id,
            agent_id=target,
            message=task,
            extra_context=brief,
            workspace=folder,
            extra_roots=(),
        )
        child, result = await orchestrator.start(
            loop, parent, request, kind=DELEGATE, task_id=task_id, wait=wait
        )
        text = render_result(child, result)
        outputs = await asyncio.to_thread(_listing, folder / "outputs", ctx.workspace)
        if outputs:
            text += "\n\nFiles in outputs/: " + ", ".join(outputs)
        elif result is None:
            text += f"\nIts files will be in delegations/{task_id}/outputs/."
        return text

    return Tool(
        name=DELEGATE,
        description=(
            "Hand a task to another agent you are linked with; it sees only the files you pass."
        ),
        parameters={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "The agent id to delegate to."},
                "task": {"type": "string", "description": "The complete brief of the task."},
                "files": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Workspace files to give it (copied to its inputs/).",
                },
                "wait": arg.WAIT_SCHEMA,
            },
            "required": ["agent", "task"],
        },
        handler=delegate,
        kind=ToolKind.ORCHESTRATE,
    )


def _listing(folder: Path, workspace: Path) -> list[str]:
    if not folder.is_dir():
        return []
    root = workspace.resolve()
    found = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return [p.resolve().relative_to(root).as_posix() for p in found[:MAX_OUTPUT_LISTING]]
