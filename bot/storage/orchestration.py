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
from functools import partial
from typing import Any

import structlog
from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    Update,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError

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
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [link_from_row(row) for row in rows]

    async def team_of(self, agent_id: str) -> Team | None:
        """The team ``agent_id`` leads or belongs to (the oldest one, should there be several).
        Teams are few and ``members`` is JSON, so they are read whole and matched here."""
        query = select(TeamRow).order_by(TeamRow.created_at, TeamRow.id)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        teams = [team_from_row(row) for row in rows]
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
        stmt = insert(TeamTaskRow).values(values).returning(*_TASK_COLUMNS)
        try:
            row = await self._db.run_statement(lambda conn: conn.execute(stmt).one())
        except IntegrityError as exc:
            raise TaskConflict(f"no team {team_id!r}") from exc
        log.info("team_task.created", task_id=values["id"], team_id=team_id, assignee=assignee)
        return task_from_row(row)

    async def get_task(self, task_id: str) -> TeamTask | None:
        query = select(*_TASK_COLUMNS).where(_TASK.id == task_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).one_or_none())
        return None if row is None else task_from_row(row)

    async def list_tasks(self, team_id: str, status: TaskStatus | None = None) -> list[TeamTask]:
        """The team's tasks (of one status when given), oldest first."""
        query = select(*_TASK_COLUMNS).where(_TASK.team_id == team_id)
        if status is not None:
            query = query.where(_TASK.status == status.value)
        query = query.order_by(_TASK.created_at, _TASK.id)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [task_from_row(row) for row in rows]

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
        row = await self._db.run_write(partial(_append_comment, task_id, comment))
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
        row, current = await self._db.run_write(partial(_set_or_read, stmt, task_id))
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
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [link_from_row(row) for row in rows]

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
        await self._db.run_statement(lambda conn: conn.execute(stmt).close())
        log.info("agent_link.stored", source=stored.source, target=stored.target)
        return stored

    async def remove_link(self, source: str, target: str) -> bool:
        """Remove the link from ``source`` to ``target``; False when there is none."""
        stmt = delete(AgentLinkRow).where(
            AgentLinkRow.source == source, AgentLinkRow.target == target
        )
        removed: int = await self._db.run_statement(lambda conn: conn.execute(stmt).rowcount)
        if removed:
            log.info("agent_link.removed", source=source, target=target)
        return removed > 0

    # --- admin: teams ----------------------------------------------------------------------

    async def list_teams(self) -> list[Team]:
        """Every team, by id."""
        query = select(TeamRow).order_by(TeamRow.id)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [team_from_row(row) for row in rows]

    async def get_team(self, team_id: str) -> Team | None:
        query = select(TeamRow).where(TeamRow.id == team_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).first())
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
        await self._db.run_write(partial(_insert_team, stored))
        log.info("team.created", team_id=stored.id, lead=stored.lead, members=stored.members)
        return stored

    async def add_member(self, team_id: str, agent_id: str) -> Team:
        """Add ``agent_id`` to the team; ValueError for an unknown team or an agent that is
        already in a team (this one or another)."""
        check_id(agent_id)
        updated = await self._db.run_write(partial(_add_member, team_id, agent_id))
        log.info("team.member_added", team_id=team_id, agent_id=agent_id)
        return updated

    async def remove_member(self, team_id: str, agent_id: str) -> Team:
        """Remove a member; ValueError for an unknown team, its lead, or a non-member."""
        updated = await self._db.run_write(partial(_remove_member, team_id, agent_id))
        log.info("team.member_removed", team_id=team_id, agent_id=agent_id)
        return updated

    async def delete_team(self, team_id: str) -> bool:
        """Delete the team and its tasks; False when there is no such team."""
        removed = await self._db.run_write(partial(_delete_team, team_id))
        if removed:
            log.info("team.deleted", team_id=team_id)
        return removed > 0


# --- the transactions (each run whole by Database.run_write) ---------------------------------


def _append_comment(task_id: str, comment: dict[str, str], conn: Connection) -> Row[Any]:
    """The task with ``comment`` appended, read and written under the row's lock."""
    _begin_immediate(conn)
    current = conn.execute(
        select(_TASK.comments).where(_TASK.id == task_id).with_for_update()
    ).one_or_none()
    if current is None:
        raise TaskConflict(f"no task {task_id!r}")
    return conn.execute(
        update(TeamTaskRow)
        .where(_TASK.id == task_id)
        .values(comments=[*(current.comments or []), comment], updated_at=utcnow())
        .returning(*_TASK_COLUMNS)
    ).one()


def _set_or_read(
    stmt: Update, task_id: str, conn: Connection
) -> tuple[Row[Any] | None, Row[Any] | None]:
    """(the changed row, None), or (None, the task as ``stmt`` found it, None when missing)."""
    row = conn.execute(stmt).one_or_none()
    if row is not None:
        return row, None
    # still in the transaction: the state it refused
    return None, conn.execute(select(*_TASK_COLUMNS).where(_TASK.id == task_id)).one_or_none()


def _insert_team(team: Team, conn: Connection) -> None:
    _lock_teams(conn)
    teams = _all_teams(conn)
    if any(other.id == team.id for other in teams):
        raise ValueError(f"team {team.id!r} exists")
    _refuse_taken(team.agents, teams)
    now = utcnow()
    conn.execute(
        insert(TeamRow).values(
            id=team.id,
            lead=team.lead,
            members=list(team.members),
            settings=settings_json(team.settings),
            description=team.description,
            created_at=now,
            updated_at=now,
        )
    )


def _add_member(team_id: str, agent_id: str, conn: Connection) -> Team:
    _lock_teams(conn)
    teams = _all_teams(conn)
    team = _find(teams, team_id)
    _refuse_taken([agent_id], teams)
    updated = Team(team.id, team.lead, (*team.members, agent_id), team.settings, team.description)
    _save_members(conn, updated)
    return updated


def _remove_member(team_id: str, agent_id: str, conn: Connection) -> Team:
    _lock_teams(conn)
    team = _find(_all_teams(conn), team_id)
    if agent_id == team.lead:
        raise ValueError(f"{agent_id} leads team {team_id}: delete the team to remove its lead")
    if agent_id not in team.members:
        raise ValueError(f"{agent_id} is not a member of team {team_id}")
    members = tuple(m for m in team.members if m != agent_id)
    updated = Team(team.id, team.lead, members, team.settings, team.description)
    _save_members(conn, updated)
    return updated


def _delete_team(team_id: str, conn: Connection) -> int:
    # The foreign key cascades too; deleting explicitly keeps it so on a connection
    # opened without SQLite's foreign_keys pragma.
    conn.execute(delete(TeamTaskRow).where(_TASK.team_id == team_id))
    removed: int = conn.execute(delete(TeamRow).where(TeamRow.id == team_id)).rowcount
    return removed


def _lock_teams(conn: Connection) -> None:
    """Serialise team membership changes across processes until the transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _TEAM_LOCK})
    _begin_immediate(conn)


def _begin_immediate(conn: Connection) -> None:
    """SQLite: take the write lock before the first read of a read-modify-write. The
    driver would begin the transaction only at the first write, so another process could
    change the rows read meanwhile (and the writer queue only orders this process)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _all_teams(conn: Connection) -> list[Team]:
    rows = conn.execute(select(TeamRow.__table__).order_by(TeamRow.id))
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


def _save_members(conn: Connection, team: Team) -> None:
    conn.execute(
        update(TeamRow)
        .where(TeamRow.id == team.id)
        .values(members=list(team.members), updated_at=utcnow())
    )
