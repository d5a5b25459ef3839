"""Small durable state for channel adapters: key/value state and inbound-message dedupe."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from functools import cache

import structlog
from sqlalchemy import Executable, bindparam, delete, select

from bot.storage._db import Database
from bot.storage._sql import dialect_insert, table_of
from bot.storage.models import ChannelStateRow, ProcessedMessageRow, utcnow

log = structlog.get_logger(__name__)

DEFAULT_DEDUPE_TTL_SECONDS = 7 * 24 * 3600
MAX_KEY_LENGTH = 255


class SqlChannelState:
    """Per-channel key/value strings, e.g. the Telegram ``getUpdates`` offset."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, channel: str, key: str) -> str | None:
        query = select(ChannelStateRow.value).where(
            ChannelStateRow.channel == channel, ChannelStateRow.key == key
        )
        value: str | None = await self._db.run_read(lambda conn: conn.execute(query).scalar())
        return value

    async def set(self, channel: str, key: str, value: str) -> None:
        params = {"channel": channel, "key": key, "value": value, "updated_at": utcnow()}
        statement = _set_state(self._db.dialect)
        await self._db.run_statement(lambda conn: conn.execute(statement, params).close())


class SqlDedupeStore:
    """Remembers inbound platform message ids so a redelivered message is handled once.

    An entry older than the TTL still counts as seen until :meth:`prune` removes it.
    """

    def __init__(self, db: Database, ttl_seconds: float = DEFAULT_DEDUPE_TTL_SECONDS) -> None:
        self._db = db
        self.ttl = timedelta(seconds=ttl_seconds)

    async def seen(self, key: str) -> bool:
        """Record ``key``; True if it was already recorded. Atomic across processes."""
        # Urgent: commands and adapters' update keys are recorded before the platform's ack.
        statement, params = mark_seen(self._db.dialect), seen_params(key)
        inserted = await self._db.run_statement(
            lambda conn: conn.execute(statement, params).rowcount, urgent=True
        )
        return inserted == 0

    async def has_seen(self, key: str) -> bool:
        """Whether ``key`` is recorded (a read: nothing is written)."""
        params = {"key": fit_key(key)}
        found = await self._db.run_read(lambda conn: conn.execute(_has_seen(), params).scalar())
        return found is not None

    async def forget(self, key: str) -> None:
        """Undo :meth:`seen` (the message was not accepted; its redelivery must count)."""
        statement = delete(ProcessedMessageRow).where(ProcessedMessageRow.key == fit_key(key))
        await self._db.run_statement(lambda conn: conn.execute(statement).close())

    async def prune(self) -> int:
        """Delete entries older than the TTL; returns how many."""
        cutoff = utcnow() - self.ttl
        statement = delete(ProcessedMessageRow).where(ProcessedMessageRow.created_at < cutoff)
        removed = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        if removed:
            log.info("storage.dedupe_pruned", removed=removed)
        return removed


@cache
def mark_seen(dialect: str) -> Executable:
    """Record a dedupe key unless present (rowcount 0 then); run with :func:`seen_params`."""
    table = table_of(ProcessedMessageRow)
    return dialect_insert(dialect, table).on_conflict_do_nothing(index_elements=[table.c.key])


@cache
def _has_seen() -> Executable:
    """Built once: an adapter looks up every update before handing it over."""
    table = table_of(ProcessedMessageRow)
    return select(table.c.key).where(table.c.key == bindparam("key"))


def seen_params(key: str) -> dict[str, object]:
    return {"key": fit_key(key), "created_at": utcnow()}


@cache
def _set_state(dialect: str) -> Executable:
    table = table_of(ChannelStateRow)
    stmt = dialect_insert(dialect, table)
    return stmt.on_conflict_do_update(
        index_elements=[table.c.channel, table.c.key],
        set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
    )


def fit_key(key: str) -> str:
    """``key`` as stored in ``processed_messages`` (long keys become a digest)."""
    # Postgres rejects values longer than the column; a digest keeps long keys distinct.
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()
