"""Links, teams and tasks in memory: for tests, benchmarks and embedding without a database."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from agent_core.orchestration.records import (
    AgentLink,
    TaskComment,
    TaskConflict,
    TaskStatus,
    Team,
    TeamTask,
)


class MemoryOrchestrationStore:
    """Implements :class:`OrchestrationStore` and :class:`TaskStore`."""

    def __init__(self, links: list[AgentLink] | None = None, teams: list[Team] | None = None):
        self.links = list(links or [])
        self.teams = {team.id: team for team in teams or []}
        self.tasks: dict[str, TeamTask] = {}

    async def links_of(self, agent_id: str) -> list[AgentLink]:
        return [link for link in self.links if agent_id in (link.source, link.target)]

    async def team_of(self, agent_id: str) -> Team | None:
        return next((team for team in self.teams.values() if team.has(agent_id)), None)

    async def create_task(
        self,
        team_id: str,
        title: str,
        description: str,
        *,
        created_by: str,
        assignee: str | None = None,
    ) -> TeamTask:
        now = datetime.now(UTC)
        task = TeamTask(
            id=uuid.uuid4().hex[:12],
            team_id=team_id,
            title=title,
            description=description,
            status=TaskStatus.ASSIGNED if assignee else TaskStatus.OPEN,
            created_by=created_by,
            created_at=now,
            updated_at=now,
            assignee=assignee,
        )
        self.tasks[task.id] = task
        return task

    async def get_task(self, task_id: str) -> TeamTask | None:
        return self.tasks.get(task_id)

    async def list_tasks(self, team_id: str, status: TaskStatus | None = None) -> list[TeamTask]:
        return [
            t
            for t in self.tasks.values()
            if t.team_id == team_id and (status is None or t.status is status)
        ]

    def _task(self, task_id: str) -> TeamTask:
        task = self.tasks.get(task_id)
        if task is None:
            raise TaskConflict(f"no task {task_id!r}")
        return task

    def _save(self, task: TeamTask, **changes: object) -> TeamTask:
        updated = replace(task, updated_at=datetime.now(UTC), **changes)  # type: ignore[arg-type]
        self.tasks[task.id] = updated
        return updated

    async def assign_task(self, task_id: str, assignee: str) -> TeamTask:
        task = self._task(task_id)
        if task.status not in (TaskStatus.OPEN, TaskStatus.ASSIGNED):
            raise TaskConflict(f"task {task_id} is {task.status}: it can't be reassigned")
        return self._save(task, status=TaskStatus.ASSIGNED, assignee=assignee)

    async def claim_task(self, task_id: str, agent_id: str) -> TeamTask:
        task = self._task(task_id)
        if task.status is TaskStatus.OPEN or (
            task.status is TaskStatus.ASSIGNED and task.assignee == agent_id
        ):
            return self._save(task, status=TaskStatus.IN_PROGRESS, assignee=agent_id)
        raise TaskConflict(
            f"task {task_id} is {task.status}"
            + (f" (assignee {task.assignee})" if task.assignee else "")
            + ": it can't be claimed"
        )

    async def finish_task(
        self, task_id: str, agent_id: str | None, status: TaskStatus, result: str
    ) -> TeamTask:
        task = self._task(task_id)
        if task.status.finished:
            raise TaskConflict(f"task {task_id} is already {task.status}")
        if agent_id is not None and task.assignee not in (None, agent_id):
            raise TaskConflict(f"task {task_id} belongs to {task.assignee}")
        return self._save(task, status=status, result=result, assignee=task.assignee or agent_id)

    async def comment_task(self, task_id: str, author: str, text: str) -> TeamTask:
        task = self._task(task_id)
        comment = TaskComment(author, text, datetime.now(UTC))
        return self._save(task, comments=(*task.comments, comment))
