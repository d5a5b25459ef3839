"""Agent links, teams and team tasks in SQL (``agent_links``, ``teams``, ``team_tasks``).

:class:`SqlOrchestrationStore` implements the agent core's ``OrchestrationStore`` and
``TaskStore`` with the semantics of :class:`~agent_core.orchestration.memory_store.
MemoryOrchestrationStore`, plus the admin methods behind ``loopgate links`` and
``loopgate teams``.

Several runs (and processes) work on one task board, so every task state change is one
compare-and-set ``UPDATE … WHERE status IN (…) RETURNING …``: of two agents claiming a task at
once exactly one gets it, the other a :class:`TaskConflict` naming the state it found. Comments
are appended under a lock (``SELECT … FOR UPDATE`` on Postgres, ``BEGIN IMMEDIATE`` on SQLite),
so concurrent comments are all kept.

Team membership changes take a lock for the whole transaction too (an advisory lock on
Postgres, ``BEGIN IMMEDIATE`` on SQLite), so the rule "an agent belongs to at most one team"
holds even when two ``loopgate teams`` commands race.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from sqlalchemy import ColumnElement, and_, delete, func, insert, or_, select, text, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from agent_core.orchestration import (
    AgentLink,
    LinkDirection,
    TaskConflict,
    TaskStatus,
    Team,
    TeamTask,
)
from bot.storage._db import Database
from bot.storage._orchestration_rows import (
    ID_PATTERN,
    check_id,
    link_from_row,
    settings_json,
    task_from_row,
    team_from_row,
)
from bot.storage._sql import clean, upsert_insert
from bot.storage.models import AgentLinkRow, TeamRow, TeamTaskRow, utcnow

log = structlog.get_logger(__name__)

_TEAM_LOCK = 0x4C675465  # pg_advisory_xact_lock key for team membership changes ("LgTe")
_UNFINISHED = [s.value for s in TaskStatus if not s.finished]
_TASK = TeamTaskRow.__table__.c
_TASK_COLUMNS = tuple(TeamTaskRow.__table__.c)


class SqlOrchestrationStore:
    """Implements :class:`~agent_core.orchestration.records.OrchestrationStore` and
    :class:`~agent_core.orchestration.records.TaskStore` on the bot's database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- OrchestrationStore ----------------------------------------------------------------

    async def links_of(self, agent_id: str) -> list[AgentLink]:
        """Every link with ``agent_id`` as source or target, oldest first."""
        query = (
            select(AgentLinkRow)
            .where(or_(AgentLinkRow.source == agent_id, AgentLinkRow.target == agent_id))
            .order_by(AgentLinkRow.id)
        )
        async with self._db.sessionmaker() as s:
            return [link_from_row(row) for row in await s.scalars(query)]

    async def team_of(self, agent_id: str) -> Team | None:
        """The team ``agent_id`` leads or belongs to (the oldest one, should there be several).
        Teams are few and ``members`` is JSON, so they are read whole and matched here."""
        query = select(TeamRow).order_by(TeamRow.created_at, TeamRow.id)
        async with self._db.sessionmaker() as s:
            teams = [team_from_row(row) for row in await s.scalars(query)]
        return next((team for team in teams if team.has(agent_id)), None)

    # --- TaskStore -------------------------------------------------------------------------

    async def create_task(
        self,
        team_id: str,
        title: str,
        description: str,
        *,
        created_by: str,
        assignee: str | None = None,
    ) -> TeamTask:
        """A new task, ``assigned`` when ``assignee`` is given, else ``open``. TaskConflict
        when the team does not exist (the foreign key refuses the row)."""
        if not ID_PATTERN.fullmatch(team_id):
            raise TaskConflict(f"no team {team_id!r}")
        now = utcnow()
        values: dict[str, Any] = {
            "id": uuid.uuid4().hex[:12],
            "team_id": team_id,
            "title": clean(title),
            "description": clean(description),
            "status": (TaskStatus.ASSIGNED if assignee else TaskStatus.OPEN).value,
            "created_by": created_by,
            "assignee": assignee,
            "result": None,
            "comments": [],
            "created_at": now,
            "updated_at": now,
        }
        try:
            async with self._db.write_connection() as conn:
                row = (
                    await conn.execute(insert(TeamTaskRow).values(values).returning(*_TASK_COLUMNS))
                ).one()
        except IntegrityError as exc:
            raise TaskConflict(f"no team {team_id!r}") from exc
        log.info("team_task.created", task_id=values["id"], team_id=team_id, assignee=assignee)
        return task_from_row(row)

    async def get_task(self, task_id: str) -> TeamTask | None:
        async with self._db.sessionmaker() as s:
            row = (await s.execute(select(*_TASK_COLUMNS).where(_TASK.id == task_id))).one_or_none()
        return None if row is None else task_from_row(row)

    async def list_tasks(self, team_id: str, status: TaskStatus | None = None) -> list[TeamTask]:
        """The team's tasks (of one status when given), oldest first."""
        query = select(*_TASK_COLUMNS).where(_TASK.team_id == team_id)
        if status is not None:
            query = query.where(_TASK.status == status.value)
        query = query.order_by(_TASK.created_at, _TASK.id)
        async with self._db.sessionmaker() as s:
            return [task_from_row(row) for row in await s.execute(query)]

    async def assign_task(self, task_id: str, assignee: str) -> TeamTask:
        """open/assigned → assigned to ``assignee``."""
        return await self._compare_and_set(
            task_id,
            _TASK.status.in_([TaskStatus.OPEN.value, TaskStatus.ASSIGNED.value]),
            {"status": TaskStatus.ASSIGNED.value, "assignee": assignee},
            lambda t: f"task {t.id} is {t.status}: it can't be reassigned",
        )

    async def claim_task(self, task_id: str, agent_id: str) -> TeamTask:
        """open, or assigned to ``agent_id`` → in_progress by ``agent_id``."""
        return await self._compare_and_set(
            task_id,
            or_(
                _TASK.status == TaskStatus.OPEN.value,
                and_(_TASK.status == TaskStatus.ASSIGNED.value, _TASK.assignee == agent_id),
            ),
            {"status": TaskStatus.IN_PROGRESS.value, "assignee": agent_id},
            lambda t: (
                f"task {t.id} is {t.status}"
                + (f" (assignee {t.assignee})" if t.assignee else "")
                + ": it can't be claimed"
            ),
        )

    async def finish_task(
        self, task_id: str, agent_id: str | None, status: TaskStatus, result: str
    ) -> TeamTask:
        """An unfinished task → ``status`` with ``result``. With ``agent_id``, only the
        assignee (or anyone while unassigned, who then becomes its assignee) may finish it."""
        allowed: ColumnElement[bool] = _TASK.status.in_(_UNFINISHED)
        values: dict[str, Any] = {"status": status.value, "result": clean(result)}
        if agent_id is not None:
            allowed = and_(allowed, or_(_TASK.assignee.is_(None), _TASK.assignee == agent_id))
            values["assignee"] = func.coalesce(_TASK.assignee, agent_id)

        def refusal(task: TeamTask) -> str:
            if task.status.finished:
                return f"task {task.id} is already {task.status}"
            return f"task {task.id} is {task.status} and belongs to {task.assignee}"

        return await self._compare_and_set(task_id, allowed, values, refusal)

    async def comment_task(self, task_id: str, author: str, text: str) -> TeamTask:
        """Append a comment; under a row lock, so concurrent comments are all kept."""
        comment = {"author": author, "text": clean(text), "at": utcnow().isoformat()}
        async with self._db.write_connection() as conn:
            await self._begin_immediate(conn)
            current = (
                await conn.execute(
                    select(_TASK.comments).where(_TASK.id == task_id).with_for_update()
                )
            ).one_or_none()
            if current is None:
                raise TaskConflict(f"no task {task_id!r}")
            row = (
                await conn.execute(
                    update(TeamTaskRow)
                    .where(_TASK.id == task_id)
                    .values(comments=[*(current.comments or []), comment], updated_at=utcnow())
                    .returning(*_TASK_COLUMNS)
                )
            ).one()
        return task_from_row(row)

    async def _compare_and_set(
        self,
        task_id: str,
        allowed: ColumnElement[bool],
        values: dict[str, Any],
        refusal: Callable[[TeamTask], str],
    ) -> TeamTask:
        """One UPDATE that changes the task only while ``allowed`` holds, returning the new
        row; when nothing matched, the task as it is now explains the TaskConflict."""
        stmt = (
            update(TeamTaskRow)
            .where(_TASK.id == task_id, allowed)
            .values(updated_at=utcnow(), **values)
            .returning(*_TASK_COLUMNS)
        )
        current: Row[Any] | None = None
        async with self._db.write_connection() as conn:
            row = (await conn.execute(stmt)).one_or_none()
            if row is None:
                found = await conn.execute(select(*_TASK_COLUMNS).where(_TASK.id == task_id))
                current = found.one_or_none()  # still in the transaction: the state it refused
        if row is not None:
            task = task_from_row(row)
            log.info("team_task.changed", task_id=task_id, status=str(task.status))
            return task
        if current is None:
            raise TaskConflict(f"no task {task_id!r}")
        raise TaskConflict(refusal(task_from_row(current)))

    # --- admin: links ----------------------------------------------------------------------

    async def list_links(self) -> list[AgentLink]:
        """Every link, by source then target."""
        query = select(AgentLinkRow).order_by(AgentLinkRow.source, AgentLinkRow.target)
        async with self._db.sessionmaker() as s:
            return [link_from_row(row) for row in await s.scalars(query)]

    async def add_link(self, link: AgentLink) -> AgentLink:
        """Store ``link``, replacing the direction and description of an existing link with
        the same source and target. ValueError for a link from an agent to itself."""
        check_id(link.source)
        check_id(link.target)
        if link.source == link.target:
            raise ValueError(f"an agent can't link to itself ({link.source})")
        stored = AgentLink(
            link.source, link.target, LinkDirection(link.direction), clean(link.description)
        )
        stmt = upsert_insert(self._db, AgentLinkRow).values(
            source=stored.source,
            target=stored.target,
            direction=stored.direction.value,
            description=stored.description,
            created_at=utcnow(),
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[AgentLinkRow.source, AgentLinkRow.target],
            set_={"direction": stmt.excluded.direction, "description": stmt.excluded.description},
        )
        async with self._db.write_connection() as conn:
            await conn.execute(stmt)
        log.info("agent_link.stored", source=stored.source, target=stored.target)
        return stored

    async def remove_link(self, source: str, target: str) -> bool:
        """Remove the link from ``source`` to ``target``; False when there is none."""
        async with self._db.write_connection() as conn:
            result = await conn.execute(
                delete(AgentLinkRow).where(
                    AgentLinkRow.source == source, AgentLinkRow.target == target
                )
            )
        removed = result.rowcount
        if removed:
            log.info("agent_link.removed", source=source, target=target)
        return removed > 0

    # --- admin: teams ----------------------------------------------------------------------

    async def list_teams(self) -> list[Team]:
        """Every team, by id."""
        async with self._db.sessionmaker() as s:
            return [
                team_from_row(row) for row in await s.scalars(select(TeamRow).order_by(TeamRow.id))
            ]

    async def get_team(self, team_id: str) -> Team | None:
        async with self._db.sessionmaker() as s:
            row = await s.scalar(select(TeamRow).where(TeamRow.id == team_id))
        return None if row is None else team_from_row(row)

    async def create_team(self, team: Team) -> Team:
        """Store a new team. ValueError when the id is taken or when the lead or a member
        already belongs to another team (an agent is in at most one team)."""
        check_id(team.id, "team")
        for agent_id in team.agents:
            check_id(agent_id)
        stored = Team(
            team.id,
            team.lead,
            tuple(dict.fromkeys(m for m in team.members if m != team.lead)),
            team.settings,
            clean(team.description),
        )
        now = utcnow()
        async with self._db.write_connection() as conn:
            await self._lock_teams(conn)
            teams = await _all_teams(conn)
            if any(other.id == team.id for other in teams):
                raise ValueError(f"team {team.id!r} exists")
            _refuse_taken(stored.agents, teams)
            await conn.execute(
                insert(TeamRow).values(
                    id=stored.id,
                    lead=stored.lead,
                    members=list(stored.members),
                    settings=settings_json(stored.settings),
                    description=stored.description,
                    created_at=now,
                    updated_at=now,
                )
            )
        log.info("team.created", team_id=stored.id, lead=stored.lead, members=stored.members)
        return stored

    async def add_member(self, team_id: str, agent_id: str) -> Team:
        """Add ``agent_id`` to the team; ValueError for an unknown team or an agent that is
        already in a team (this one or another)."""
        check_id(agent_id)
        async with self._db.write_connection() as conn:
            await self._lock_teams(conn)
            teams = await _all_teams(conn)
            team = _find(teams, team_id)
            _refuse_taken([agent_id], teams)
            updated = Team(
                team.id, team.lead, (*team.members, agent_id), team.settings, team.description
            )
            await _save_members(conn, updated)
        log.info("team.member_added", team_id=team_id, agent_id=agent_id)
        return updated

    async def remove_member(self, team_id: str, agent_id: str) -> Team:
        """Remove a member; ValueError for an unknown team, its lead, or a non-member."""
        async with self._db.write_connection() as conn:
            await self._lock_teams(conn)
            team = _find(await _all_teams(conn), team_id)
            if agent_id == team.lead:
                raise ValueError(
                    f"{agent_id} leads team {team_id}: delete the team to remove its lead"
                )
            if agent_id not in team.members:
                raise ValueError(f"{agent_id} is not a member of team {team_id}")
            members = tuple(m for m in team.members if m != agent_id)
            updated = Team(team.id, team.lead, members, team.settings, team.description)
            await _save_members(conn, updated)
        log.info("team.member_removed", team_id=team_id, agent_id=agent_id)
        return updated

    async def delete_team(self, team_id: str) -> bool:
        """Delete the team and its tasks; False when there is no such team."""
        async with self._db.write_connection() as conn:
            # The foreign key cascades too; deleting explicitly keeps it so on a connection
            # opened without SQLite's foreign_keys pragma.
            await conn.execute(delete(TeamTaskRow).where(_TASK.team_id == team_id))
            result = await conn.execute(delete(TeamRow).where(TeamRow.id == team_id))
        removed = result.rowcount
        if removed:
            log.info("team.deleted", team_id=team_id)
        return removed > 0

    async def _lock_teams(self, conn: AsyncConnection) -> None:
        """Serialise team membership changes across processes until the transaction ends."""
        if self._db.dialect == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _TEAM_LOCK})
        await self._begin_immediate(conn)

    async def _begin_immediate(self, conn: AsyncConnection) -> None:
        """SQLite: take the write lock before the first read of a read-modify-write. The
        driver would begin the transaction only at the first write, so another process could
        change the rows read meanwhile (and the writer queue only orders this process)."""
        if self._db.dialect == "sqlite":
            await conn.exec_driver_sql("BEGIN IMMEDIATE")


async def _all_teams(conn: AsyncConnection) -> list[Team]:
    rows = await conn.execute(select(TeamRow.__table__).order_by(TeamRow.id))
    return [team_from_row(row) for row in rows]


def _find(teams: Iterable[Team], team_id: str) -> Team:
    team = next((t for t in teams if t.id == team_id), None)
    if team is None:
        raise ValueError(f"no team {team_id!r}")
    return team


def _refuse_taken(agent_ids: Iterable[str], teams: Iterable[Team]) -> None:
    for team in teams:
        for agent_id in agent_ids:
            if team.has(agent_id):
                role = "already leads" if team.lead == agent_id else "is already a member of"
                raise ValueError(
                    f"{agent_id} {role} team {team.id} (an agent is in at most one team)"
                )


async def _save_members(conn: AsyncConnection, team: Team) -> None:
    await conn.execute(
        update(TeamRow)
        .where(TeamRow.id == team.id)
        .values(members=list(team.members), updated_at=utcnow())
    )
