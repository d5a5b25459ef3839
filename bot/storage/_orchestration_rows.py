"""Rows of the orchestration tables ↔ the agent core's records, and the id rule.

Kept apart from :mod:`bot.storage.orchestration` so the store module holds only the statements.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import Row

from agent_core.orchestration import (
    AgentLink,
    LinkDirection,
    TaskComment,
    TaskStatus,
    Team,
    TeamSettings,
    TeamTask,
    WorkspaceScope,
)

log = structlog.get_logger(__name__)

# The same rule as AgentConfig.id; team ids follow it too (they name workspaces).
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_id(value: str, what: str = "agent") -> str:
    """``value`` when it is a valid id, else ValueError (ids are stored in 64-char columns)."""
    if not ID_PATTERN.fullmatch(value):
        raise ValueError(f"invalid {what} id {value!r}: use 1-64 letters, digits, _ and -")
    return value


def settings_json(settings: TeamSettings) -> dict[str, Any]:
    return {
        "shared_workspace": settings.shared_workspace,
        "workspace_scope": WorkspaceScope(settings.workspace_scope).value,
    }


def link_from_row(row: Row[Any]) -> AgentLink:
    return AgentLink(row.source, row.target, LinkDirection(row.direction), row.description)


def team_from_row(row: Row[Any]) -> Team:
    settings = row.settings or {}
    scope = settings.get("workspace_scope", WorkspaceScope.CHAT.value)
    if scope not in {s.value for s in WorkspaceScope}:
        log.warning("team.invalid_scope", team_id=row.id, workspace_scope=scope)
        scope = WorkspaceScope.CHAT.value
    return Team(
        id=row.id,
        lead=row.lead,
        members=tuple(row.members or ()),
        settings=TeamSettings(
            shared_workspace=bool(settings.get("shared_workspace", False)),
            workspace_scope=WorkspaceScope(scope),
        ),
        description=row.description,
    )


def task_from_row(row: Row[Any]) -> TeamTask:
    return TeamTask(
        id=row.id,
        team_id=row.team_id,
        title=row.title,
        description=row.description,
        status=TaskStatus(row.status),
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        assignee=row.assignee,
        result=row.result,
        comments=tuple(
            TaskComment(c["author"], c["text"], datetime.fromisoformat(c["at"]))
            for c in row.comments or ()
        ),
    )
