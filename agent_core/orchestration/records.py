"""What orchestration keeps: links between agents, teams, and the tasks of a team.

The agent core only reads and updates them through the protocols below; the bot stores them in
SQL (``bot/storage/orchestration.py``) and :class:`MemoryOrchestrationStore` keeps them in memory
for tests and embedding.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from agent_core.errors import AgentError


class LinkDirection(enum.StrEnum):
    OUTBOUND = "outbound"  # source may delegate to target
    INBOUND = "inbound"  # target may delegate to source
    BIDIRECTIONAL = "bidirectional"  # both


@dataclass(frozen=True, slots=True)
class AgentLink:
    source: str
    target: str
    direction: LinkDirection = LinkDirection.OUTBOUND
    description: str = ""  # when to delegate; shown to the delegating agent

    def delegates_from(self, agent_id: str) -> str | None:
        """The agent ``agent_id`` may delegate to over this link, or None."""
        if self.source == agent_id and self.direction != LinkDirection.INBOUND:
            return self.target
        if self.target == agent_id and self.direction != LinkDirection.OUTBOUND:
            return self.source
        return None


class WorkspaceScope(enum.StrEnum):
    CHAT = "chat"  # isolated mode: one team workspace per (team, chat)
    USER = "user"  # isolated mode: one team workspace per (team, user)


@dataclass(frozen=True, slots=True)
class TeamSettings:
    shared_workspace: bool = False  # True: one workspace for the whole team
    workspace_scope: WorkspaceScope = WorkspaceScope.CHAT  # isolated mode only


@dataclass(frozen=True, slots=True)
class Team:
    id: str
    lead: str
    members: tuple[str, ...] = ()  # besides the lead
    settings: TeamSettings = field(default_factory=TeamSettings)
    description: str = ""

    @property
    def agents(self) -> tuple[str, ...]:
        """The lead first, then the members."""
        return (self.lead, *(m for m in self.members if m != self.lead))

    def has(self, agent_id: str) -> bool:
        return agent_id in self.agents


class TaskStatus(enum.StrEnum):
    OPEN = "open"  # nobody is on it
    ASSIGNED = "assigned"  # an agent should do it
    IN_PROGRESS = "in_progress"  # claimed by its assignee
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class TaskComment:
    author: str
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class TeamTask:
    id: str
    team_id: str
    title: str
    description: str
    status: TaskStatus
    created_by: str
    created_at: datetime
    updated_at: datetime
    assignee: str | None = None
    result: str | None = None
    comments: tuple[TaskComment, ...] = ()


class TaskConflict(AgentError):
    """The task is not in a state that allows the change (already claimed, finished, …)."""


class OrchestrationStore(Protocol):
    """What the router reads to resolve an agent's mode."""

    async def links_of(self, agent_id: str) -> list[AgentLink]:
        """Every link with ``agent_id`` as source or target."""

    async def team_of(self, agent_id: str) -> Team | None:
        """The team ``agent_id`` leads or belongs to (the first one when several)."""


class TaskStore(Protocol):
    """Team tasks, changed only by these atomic steps (each raises :class:`TaskConflict` when
    the task is missing or not in a state that allows it)."""

    async def create_task(
        self,
        team_id: str,
        title: str,
        description: str,
        *,
        created_by: str,
        assignee: str | None = None,
    ) -> TeamTask: ...

    async def get_task(self, task_id: str) -> TeamTask | None: ...

    async def list_tasks(self, team_id: str, status: TaskStatus | None = None) -> list[TeamTask]:
        """Oldest first."""

    async def assign_task(self, task_id: str, assignee: str) -> TeamTask:
        """open/assigned → assigned to ``assignee``."""

    async def claim_task(self, task_id: str, agent_id: str) -> TeamTask:
        """open, or assigned to ``agent_id`` → in_progress by ``agent_id``."""

    async def finish_task(
        self, task_id: str, agent_id: str | None, status: TaskStatus, result: str
    ) -> TeamTask:
        """An unfinished task → completed/failed/cancelled with ``result``. ``agent_id`` set:
        only its assignee (or anyone when unassigned) may finish it."""

    async def comment_task(self, task_id: str, author: str, text: str) -> TeamTask: ...
