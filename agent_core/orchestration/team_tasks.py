"""The ``team_tasks`` tool: a team's shared task list (Team mode only).

Actions: ``create``, ``list``, ``get``, ``assign``, ``claim``, ``complete``, ``comment``.
Creating or assigning a task *to another member* dispatches it: the member runs it in the team
workspace (spec §11), claims it and completes it with its result; when its run ends with the
task still open, the run's answer becomes the result (or the task fails with the run). With
``wait`` true the result is this tool's result; otherwise it is announced when done.

Task states: open → assigned → in_progress → completed | failed | cancelled.
"""

from __future__ import annotations

import contextlib
from typing import Any

import agent_core.orchestration.arguments as arg
from agent_core.errors import ToolError
from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.modes import TEAM_TASKS
from agent_core.orchestration.records import TaskConflict, TaskStatus, TaskStore, Team, TeamTask
from agent_core.orchestration.tools import render_result
from agent_core.orchestration.workspaces import team_workspace
from agent_core.run import RunResult, RunStatus, is_no_reply
from agent_core.settings import AgentSettings
from agent_core.tools.base import Tool, ToolContext, ToolKind
from agent_core.workspace import user_workspace

ACTIONS = ("create", "list", "get", "assign", "claim", "complete", "comment")
MAX_LISTED = 50


def describe(task: TeamTask, *, full: bool = False) -> str:
    who = f" → {task.assignee}" if task.assignee else ""
    line = f"{task.id} [{task.status}{who}] {task.title}"
    if not full:
        if task.result:
            line += f" — result: {task.result.splitlines()[0][:200]}"
        return line
    parts = [line, f"created by {task.created_by}", task.description or "(no description)"]
    parts += [f"comment by {c.author}: {c.text}" for c in task.comments]
    if task.result is not None:
        parts.append(f"result:\n{task.result}")
    return "\n".join(parts)


def team_tasks_tool(orchestrator: Orchestrator, settings: AgentSettings, store: TaskStore) -> Tool:
    me = settings.id

    def team() -> Team:
        found = settings.orchestration.team
        if found is None:
            raise ToolError(TEAM_TASKS, "this agent is not in a team")
        return found

    async def task_of(args: dict[str, Any], ctx: ToolContext, team_id: str) -> TeamTask:
        # A dispatched run's own task is the default: "claim" and "complete" need no id.
        own = ctx.request.team_task_id if ctx.request is not None else None
        task_id = arg.text(args, TEAM_TASKS, "task_id", required=own is None) or own or ""
        task = await store.get_task(task_id)
        if task is None or task.team_id != team_id:
            raise ToolError(TEAM_TASKS, f"no task {task_id!r} in team {team_id}")
        return task

    def member(team_: Team, agent_id: str) -> str:
        if not team_.has(agent_id):
            raise ToolError(
                TEAM_TASKS,
                f"{agent_id!r} is not in team {team_.id} (members: {', '.join(team_.agents)})",
            )
        return agent_id

    async def dispatch(ctx: ToolContext, team_: Team, task: TeamTask, wait: bool) -> str:
        assert task.assignee is not None
        parent = orchestrator.check_limits(ctx, settings, TEAM_TASKS)
        loop = await orchestrator.resolve(task.assignee)
        shared = team_workspace(
            settings.workspace, team_, chat_id=parent.chat_id, user_id=parent.user_id
        )
        own = user_workspace(loop.settings.workspace, parent.user_id)
        message = (
            f"Team task {task.id} from {me}: {task.title}\n\n{task.description}\n\n"
            f"Claim it (team_tasks action claim, task_id {task.id}), do it, then complete it "
            "with your result (action complete). Your final answer is the result otherwise."
        )
        request = orchestrator.child_request(
            ctx,
            parent,
            kind="team_task",
            task_id=task.id,
            agent_id=task.assignee,
            message=message,
            extra_context=f"You work in team {team_.id} (lead {team_.lead}).",
            workspace=shared,
            extra_roots=(own,),
            team_task_id=task.id,
        )

        async def record(result: RunResult) -> RunResult:
            current = await store.get_task(task.id)
            if current is None or current.status.finished:
                return result
            if result.status is RunStatus.CANCELLED:
                status, text = TaskStatus.CANCELLED, "stopped before it finished"
            elif result.status is RunStatus.FAILED:
                status, text = TaskStatus.FAILED, result.error or "the run failed"
            else:
                status = TaskStatus.COMPLETED
                text = "" if is_no_reply(result.content) else result.content
            with contextlib.suppress(TaskConflict):  # finished meanwhile by the member itself
                await store.finish_task(task.id, None, status, text)
            return result

        child, result = await orchestrator.start(
            loop, parent, request, kind="team_task", task_id=task.id, wait=wait, on_end=record
        )
        if result is None:
            return render_result(child, None)
        done = await store.get_task(task.id)
        if done is None or result.status in (RunStatus.CANCELLED, RunStatus.FAILED):
            return render_result(child, result)
        return f"Task {done.id} is {done.status} by {done.assignee}.\n{describe(done, full=True)}"

    async def handle(args: dict[str, Any], ctx: ToolContext) -> str:
        action = args.get("action")
        if action not in ACTIONS:
            raise ToolError(TEAM_TASKS, f"argument 'action' must be one of {', '.join(ACTIONS)}")
        team_ = team()
        try:
            return await act(str(action), args, ctx, team_)
        except TaskConflict as exc:
            raise ToolError(TEAM_TASKS, str(exc)) from exc

    async def act(action: str, args: dict[str, Any], ctx: ToolContext, team_: Team) -> str:
        wait = arg.flag(args, TEAM_TASKS, "wait", True)
        if action == "create":
            title = arg.text(args, TEAM_TASKS, "title")
            description = arg.text(args, TEAM_TASKS, "description", required=False)
            assignee = arg.text(args, TEAM_TASKS, "assignee", required=False) or None
            if assignee:
                member(team_, assignee)
            task = await store.create_task(
                team_.id, title, description, created_by=me, assignee=assignee
            )
            if assignee and assignee != me:
                return await dispatch(ctx, team_, task, wait)
            return f"Created task {task.id}.\n{describe(task, full=True)}"
        if action == "list":
            status_arg = args.get("status")
            try:
                status = TaskStatus(status_arg) if status_arg else None
            except ValueError:
                states = ", ".join(s.value for s in TaskStatus)
                raise ToolError(TEAM_TASKS, f"status must be one of {states}") from None
            tasks = await store.list_tasks(team_.id, status)
            if not tasks:
                return "No tasks."
            lines = [describe(t) for t in tasks[-MAX_LISTED:]]
            return f"{len(tasks)} task(s) in team {team_.id}:\n" + "\n".join(lines)
        task = await task_of(args, ctx, team_.id)
        if action == "get":
            return describe(task, full=True)
        if action == "assign":
            assignee = member(team_, arg.text(args, TEAM_TASKS, "assignee"))
            task = await store.assign_task(task.id, assignee)
            if assignee != me:
                return await dispatch(ctx, team_, task, wait)
            return f"Assigned to you.\n{describe(task)}"
        if action == "claim":
            task = await store.claim_task(task.id, me)
            return f"Claimed.\n{describe(task, full=True)}"
        if action == "complete":
            result = arg.text(args, TEAM_TASKS, "result")
            failed = arg.flag(args, TEAM_TASKS, "failed", False)
            status = TaskStatus.FAILED if failed else TaskStatus.COMPLETED
            task = await store.finish_task(task.id, me, status, result)
            return f"Task {task.id} is {task.status}."
        comment = arg.text(args, TEAM_TASKS, "text")
        task = await store.comment_task(task.id, me, comment)
        return f"Comment added to {task.id}."

    return Tool(
        name=TEAM_TASKS,
        description=(
            "Your team's task list. create (with an assignee: dispatch it to that member), "
            "list, get, assign, claim, complete, comment."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS)},
                "task_id": {
                    "type": "string",
                    "description": "Default: the task you were dispatched for.",
                },
                "title": {"type": "string"},
                "description": {"type": "string"},
                "assignee": {"type": "string", "description": "A team member's agent id."},
                "result": {"type": "string", "description": "complete: the task's result."},
                "failed": {"type": "boolean", "description": "complete: the task failed."},
                "text": {"type": "string", "description": "comment: the comment."},
                "status": {"type": "string", "description": "list: only tasks in this state."},
                "wait": arg.WAIT_SCHEMA,
            },
            "required": ["action"],
        },
        handler=handle,
        kind=ToolKind.ORCHESTRATE,
    )
