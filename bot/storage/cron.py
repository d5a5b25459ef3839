"""The ``cron_jobs`` table: scheduled jobs, their next occurrence and how the last one went.

Which process fires an occurrence is not decided here: every process's ticker may try, and the
inbox's dedupe key (job id, scheduled time) lets one of them in (``bot/scheduling/ticker.py``).
What is here is careful only where two processes meet: :meth:`SqlCronJobs.advance` moves a
job on from the occurrence it read, and does nothing when another process already did.
"""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update

from agent_core import Schedule, ScheduleKind
from bot.storage._db import Database
from bot.storage._inbox_entry import message_from_json, message_to_json
from bot.storage._sql import table_of
from bot.storage.models import CronJobRow, utcnow
from channels import InboundMessage

__all__ = ["SOURCE_HEARTBEAT", "SOURCE_TOOL", "SqlCronJobs", "StoredCronJob"]

_TABLE = table_of(CronJobRow)
_NEXT_DUE = select(func.min(CronJobRow.next_run_at)).where(CronJobRow.paused.is_(False))

SOURCE_TOOL = "tool"
SOURCE_HEARTBEAT = "heartbeat"


@dataclass(frozen=True, slots=True)
class StoredCronJob:
    id: str
    agent_id: str
    session_key: str
    user_id: str
    chat: str
    """``<channel>:<chat id>``."""
    origin: InboundMessage
    """The message the job was made in: its chat, its sender, the message a group reply quotes."""
    source: str
    schedule: Schedule
    message: str
    next_run_at: datetime | None
    paused: bool
    last_run_at: datetime | None
    last_outcome: str | None
    last_entry: int | None
    created_at: datetime

    @property
    def active(self) -> bool:
        return self.next_run_at is not None


def _job_of(row: Row[Any]) -> StoredCronJob:
    return StoredCronJob(
        id=row.id,
        agent_id=row.agent_id,
        session_key=row.session_key,
        user_id=row.user_id,
        chat=row.chat,
        origin=message_from_json(row.origin),
        source=row.source,
        schedule=Schedule(
            ScheduleKind(row.kind), row.spec, row.timezone, row.schedule, anchor=row.anchor
        ),
        message=row.message,
        next_run_at=row.next_run_at,
        paused=row.paused,
        last_run_at=row.last_run_at,
        last_outcome=row.last_outcome,
        last_entry=row.last_entry,
        created_at=row.created_at,
    )


def _new_row(job: StoredCronJob, now: datetime) -> dict[str, Any]:
    """A new row's columns for ``job`` (its last run: none yet)."""
    return {
        "id": job.id,
        "agent_id": job.agent_id,
        "session_key": job.session_key,
        "user_id": job.user_id,
        "chat": job.chat,
        "origin": message_to_json(job.origin),
        "source": job.source,
        "kind": job.schedule.kind.value,
        "spec": job.schedule.spec,
        "timezone": job.schedule.timezone,
        "schedule": job.schedule.text,
        "anchor": job.schedule.anchor,
        "message": job.message,
        "next_run_at": job.next_run_at,
        "paused": job.paused,
        "created_at": now,
        "updated_at": now,
    }


def _put(conn: Connection, *, job: StoredCronJob) -> None:
    """:meth:`SqlCronJobs.put`'s transaction."""
    stored = conn.execute(
        select(CronJobRow.kind, CronJobRow.spec, CronJobRow.timezone).where(CronJobRow.id == job.id)
    ).one_or_none()
    now = utcnow()
    if stored is not None and tuple(stored) == (
        job.schedule.kind.value,
        job.schedule.spec,
        job.schedule.timezone,
    ):
        conn.execute(
            update(CronJobRow)
            .where(CronJobRow.id == job.id)
            .values(
                chat=job.chat,
                session_key=job.session_key,
                message=job.message,
                origin=message_to_json(job.origin),
                user_id=job.user_id,
                agent_id=job.agent_id,
                updated_at=now,
            )
        )
        return
    if stored is not None:
        conn.execute(delete(CronJobRow).where(CronJobRow.id == job.id))
    conn.execute(insert(CronJobRow).values(_new_row(job, now)))


def new_job_id() -> str:
    return uuid.uuid4().hex[:10]


class SqlCronJobs:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self,
        *,
        agent_id: str,
        session_key: str,
        origin: InboundMessage,
        schedule: Schedule,
        message: str,
        next_run_at: datetime | None,
        job_id: str | None = None,
        source: str = SOURCE_TOOL,
    ) -> StoredCronJob:
        now = utcnow()
        job = StoredCronJob(
            id=job_id or new_job_id(),
            agent_id=agent_id,
            session_key=session_key,
            user_id=f"{origin.chat.channel}:{origin.sender.id}",
            chat=f"{origin.chat.channel}:{origin.chat.chat_id}",
            origin=origin,
            source=source,
            schedule=schedule,
            message=message,
            next_run_at=next_run_at,
            paused=False,
            last_run_at=None,
            last_outcome=None,
            last_entry=None,
            created_at=now,
        )
        values = _new_row(job, now)
        statement = insert(CronJobRow).values(values).returning(*_TABLE.c)
        row = await self._db.run_write(lambda conn: conn.execute(statement).one())
        return _job_of(row)

    async def put(self, job: StoredCronJob) -> None:
        """Create or replace a job of a given id (a heartbeat from config.yaml); its next run
        and last run are kept when the schedule did not change."""
        await self._db.run_write(partial(_put, job=job))

    async def get(self, job_id: str) -> StoredCronJob | None:
        query = select(CronJobRow).where(CronJobRow.id == job_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).one_or_none())
        return None if row is None else _job_of(row)

    async def list(
        self,
        *,
        user_id: str | None = None,
        chat: str | None = None,
        source: str | None = None,
        active_only: bool = False,
    ) -> list[StoredCronJob]:
        """Jobs by next run (the ones with none last), then by creation."""
        query = select(CronJobRow)
        if user_id is not None:
            query = query.where(CronJobRow.user_id == user_id)
        if chat is not None:
            query = query.where(CronJobRow.chat == chat)
        if source is not None:
            query = query.where(CronJobRow.source == source)
        if active_only:
            query = query.where(CronJobRow.next_run_at.is_not(None))
        query = query.order_by(
            CronJobRow.next_run_at.is_(None), CronJobRow.next_run_at, CronJobRow.created_at
        )
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [_job_of(row) for row in rows]

    async def count_active(self, user_id: str) -> int:
        query = select(func.count()).where(
            CronJobRow.user_id == user_id,
            CronJobRow.next_run_at.is_not(None),
            CronJobRow.source == SOURCE_TOOL,
        )
        count = await self._db.run_read(lambda conn: conn.execute(query).scalar_one())
        return int(count)

    async def remove(
        self, job_id: str, *, user_id: str | None = None, chat: str | None = None
    ) -> bool:
        """Delete a job (only the user's in that chat when they are given); False if none."""
        statement = delete(CronJobRow).where(CronJobRow.id == job_id)
        if user_id is not None:
            statement = statement.where(CronJobRow.user_id == user_id)
        if chat is not None:
            statement = statement.where(CronJobRow.chat == chat)
        removed: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return removed > 0

    async def due(self, now: datetime, limit: int = 500) -> builtins.list[StoredCronJob]:
        """Jobs whose next occurrence is at or before ``now`` and not paused, oldest first."""
        query = (
            select(CronJobRow)
            .where(CronJobRow.next_run_at <= now, CronJobRow.paused.is_(False))
            .order_by(CronJobRow.next_run_at)
            .limit(limit)
        )
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [_job_of(row) for row in rows]

    async def next_due_at(self) -> datetime | None:
        """When the soonest active job is due (the ticker sleeps until then)."""
        # Every process asks once a second, idle or not: one statement on a plain connection
        # (the read lane on SQLite, autocommit on Postgres), not an ORM session's BEGIN,
        # SELECT and ROLLBACK: 51 against 604 µs of CPU on SQLite, 359 against 906 on Postgres.
        at: datetime | None = await self._db.run_read(
            lambda conn: conn.execute(_NEXT_DUE).scalar_one()
        )
        if at is not None and at.tzinfo is None:  # an aggregate skips the column's type
            at = at.replace(tzinfo=UTC)
        return at

    async def advance(
        self,
        job_id: str,
        *,
        expected: datetime,
        next_run_at: datetime | None,
        outcome: str,
        ran_at: datetime | None = None,
        entry: int | None = None,
    ) -> bool:
        """Move a job on from the occurrence at ``expected`` to ``next_run_at`` (None: no more)
        and record how that occurrence went. False when the job is gone or another process
        moved it on already."""
        values: dict[str, Any] = {
            "next_run_at": next_run_at,
            "last_outcome": outcome[:255],
            "updated_at": utcnow(),
        }
        if ran_at is not None:
            values["last_run_at"] = ran_at
        if entry is not None:
            values["last_entry"] = entry
        statement = (
            update(CronJobRow)
            .where(CronJobRow.id == job_id, CronJobRow.next_run_at == expected)
            .values(values)
        )
        moved: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return moved > 0

    async def set_next(self, job_id: str, next_run_at: datetime) -> bool:
        """Make the job due at ``next_run_at`` (``loopgate cron run``: now)."""
        statement = (
            update(CronJobRow)
            .where(CronJobRow.id == job_id)
            .values(next_run_at=next_run_at, updated_at=utcnow())
        )
        changed: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return changed > 0

    async def set_paused(self, job_id: str, paused: bool) -> bool:
        statement = (
            update(CronJobRow)
            .where(CronJobRow.id == job_id)
            .values(paused=paused, updated_at=utcnow())
        )
        changed: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return changed > 0

    async def remove_source_except(self, source: str, keep: set[str]) -> int:
        """Delete the jobs of ``source`` not in ``keep`` (heartbeats no longer configured)."""
        statement = delete(CronJobRow).where(CronJobRow.source == source)
        if keep:
            statement = statement.where(CronJobRow.id.not_in(sorted(keep)))
        removed: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return removed
