"""The system prompt's orchestration sections: the team workspace (spec section 13) and how to
use spawn, delegate and team_tasks (section 20). Like ``agent_core.mcp.prompt``, they read the
prompt through :class:`agent_core.prompt_types.PromptView`, so the builder that imports them
stays the only module that knows every section.
"""

from __future__ import annotations

from agent_core.orchestration.records import WorkspaceScope
from agent_core.prompt_types import PromptView
from agent_core.workspace import user_workspace

__all__ = ["subagent_spawning", "team_workspace"]


def team_workspace(ctx: PromptView) -> str | None:
    """Section 13: the team, its workspace's absolute path and what relative paths mean."""
    team = ctx.settings.orchestration.team
    task_id = ctx.request.team_task_id
    if team is None and task_id is None:
        return None
    lines = ["## Team workspace"]
    if team is not None:
        role = "the lead" if team.lead == ctx.settings.id else "a member"
        members = ", ".join(m for m in team.members if m != team.lead) or "none"
        lines.append(f"You are {role} of team {team.id} (lead: {team.lead}; members: {members}).")
    if task_id is not None:
        lines.append(f"You are working on team task {task_id}.")
    shared = ctx.team_workspace
    if shared is None:
        return "\n".join(lines)
    scope = ""
    if team is not None and team.settings.shared_workspace:
        scope = " shared by the whole team"
    elif team is not None:  # isolated: per chat, or per user (also when there is no chat)
        per_chat = team.settings.workspace_scope is WorkspaceScope.CHAT and ctx.request.chat_id
        scope = " for this chat" if per_chat else " for this user"
    lines.append(f"The team workspace{scope} is {shared} (an absolute path).")
    if shared == ctx.workspace:
        lines.append("It is your default workspace: relative paths mean it.")
        if ctx.request.workspace is None:  # a lead's own run: its own files are still there
            own = user_workspace(ctx.settings.workspace, ctx.request.user_id)
            lines.append(f"Your own workspace is {own}; reach it by absolute path.")
    else:
        lines.append(
            f"Relative paths still mean your default workspace ({ctx.workspace}); reach the "
            f"team's files by absolute path, e.g. {shared / 'notes.md'}."
        )
    return "\n".join(lines)


def subagent_spawning(ctx: PromptView) -> str | None:
    """Section 20: how to use the orchestration tools this agent has (spawn, delegate,
    team_tasks). Skipped for team agents with a TEAM.md: that file says how the team works."""
    profile = ctx.settings.orchestration
    if profile.team is not None and ctx.file("TEAM.md"):
        return None
    parts = [
        part
        for part in (_spawn_text(ctx), _delegate_text(ctx), _team_tasks_text(ctx))
        if part is not None
    ]
    return "## Sub-agents\n" + "\n\n".join(parts) if parts else None


def _spawn_text(ctx: PromptView) -> str | None:
    if "spawn" not in ctx.tools:
        return None
    if not ctx.full:
        return (
            "You may spawn sub-agents for independent parts of your task, each with a complete "
            "brief; several spawn calls in one turn run in parallel."
        )
    return (
        "Use spawn for long, independent sub-tasks, not for what you can answer directly. A "
        "sub-agent does not see this conversation: give it a complete brief (the goal, what it "
        "needs to know, what to return). With wait true you get its result as the tool result; "
        "with wait false it runs in the background and its result comes back later as a new "
        "message. Several spawn calls in one turn run in parallel."
    )


def _delegate_text(ctx: PromptView) -> str | None:
    if "delegate" not in ctx.tools:
        return None
    targets = ctx.settings.orchestration.targets
    if not ctx.full:
        names = ", ".join(t.agent_id for t in targets) or "none"
        return f"You may delegate to: {names}; the agent sees only the files you pass."
    lines = ["Use delegate to hand a task to an agent better suited for it:"]
    lines += [f"- {t.agent_id}: {t.description or 'no description'}" for t in targets]
    if not targets:
        lines.append("- (no agent is linked to you right now)")
    lines.append(
        "The delegated agent sees only your brief and the files you list in its files argument "
        "(paths relative to your workspace; they are copied to its inputs/). It writes its "
        "results to outputs/, which appear in your workspace under "
        "delegations/<task_id>/outputs/ (the tool result gives the task id)."
    )
    return "\n".join(lines)


def _team_tasks_text(ctx: PromptView) -> str | None:
    if "team_tasks" not in ctx.tools:
        return None
    team = ctx.settings.orchestration.team
    lines: list[str] = []
    if team is not None:
        members = ", ".join(m for m in team.members if m != team.lead) or "none"
        lines.append(f"Team {team.id}: lead {team.lead}; members {members}.")
    if not ctx.full:
        lines.append("Use team_tasks to claim, complete and comment on the tasks given to you.")
        return "\n".join(lines)
    lines.append(
        "Use team_tasks to work with them: create with an assignee dispatches the task to that "
        "member, who works on it in the team workspace; list and get collect the results; "
        "claim, complete and comment are for the tasks given to you."
    )
    return "\n".join(lines)
