"""Small durable state for channel adapters: key/value state and inbound-message dedupe."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import structlog
from sqlalchemy import delete, select

from bot.storage._sql import upsert_insert
from bot.storage.db import Database
from bot.storage.models import ChannelStateRow, ProcessedMessageRow, utcnow

log = structlog.get_logger(__name__)

DEFAULT_DEDUPE_TTL_SECONDS = 7 * 24 * 3600
MAX_KEY_LENGTH = 255


class SqlChannelState:
    """Per-channel key/value strings, e.g. the Telegram ``getUpdates`` offset."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, channel: str, key: str) -> str | None:
        async with self._db.sessionmaker() as s:
            return await s.scalar(
                select(ChannelStateRow.value).where(
                    ChannelStateRow.channel == channel, ChannelStateRow.key == key
                )
            )

    async def set(self, channel: str, key: str, value: str) -> None:
        now = utcnow()
        stmt = upsert_insert(self._db, ChannelStateRow).values(
            channel=channel, key=key, value=value, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[ChannelStateRow.channel, ChannelStateRow.key],
            set_={"value": stmt.excluded.value, "updated_at": now},
        )
        async with self._db.write_connection() as conn:
            await conn.execute(stmt)


class SqlDedupeStore:
    """Remembers inbound platform message ids so a redelivered message is handled once.

    An entry older than the TTL still counts as seen until :meth:`prune` removes it.
    """

    def __init__(self, db: Database, ttl_seconds: float = DEFAULT_DEDUPE_TTL_SECONDS) -> None:
        self._db = db
        self.ttl = timedelta(seconds=ttl_seconds)

    async def seen(self, key: str) -> bool:
        """Record ``key``; True if it was already recorded. Atomic across processes."""
        stmt = (
            upsert_insert(self._db, ProcessedMessageRow)
            .values(key=fit_key(key), created_at=utcnow())
            .on_conflict_do_nothing(index_elements=[ProcessedMessageRow.key])
        )
        # Urgent: commands and adapters' update keys are recorded before the platform's ack.
        async with self._db.write_connection(urgent=True) as conn:
            result = await conn.execute(stmt)
        inserted: int = result.rowcount
        return inserted == 0

    async def forget(self, key: str) -> None:
        """Undo :meth:`seen` (the message was not accepted; its redelivery must count)."""
        async with self._db.write() as s:
            stored = fit_key(key)
            await s.execute(delete(ProcessedMessageRow).where(ProcessedMessageRow.key == stored))

    async def prune(self) -> int:
        """Delete entries older than the TTL; returns how many."""
        cutoff = utcnow() - self.ttl
        async with self._db.write() as s:
            result = await s.execute(
                delete(ProcessedMessageRow).where(ProcessedMessageRow.created_at < cutoff)
            )
        removed: int = result.rowcount  # type: ignore[attr-defined]
        if removed:
            log.info("storage.dedupe_pruned", removed=removed)
        return removed


def fit_key(key: str) -> str:
    """``key`` as stored in ``processed_messages`` (long keys become a digest)."""
    # Postgres rejects values longer than the column; a digest keeps long keys distinct.
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()
