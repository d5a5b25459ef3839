"""Remembering inbound message ids so a platform retry is processed once.

The pipeline's one home for dedupe: the store protocol, the in-memory store, and the check the
gateway makes. The stores that persist it implement :class:`DedupeStore`: the database's
(:class:`bot.storage.SqlDedupeStore`, also written by the inbox insert) and the Redis fast path
in front of it (:class:`bot.cluster.dedupe.FastDedupe`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

import structlog

from channels import NotAccepted

log = structlog.get_logger(__name__)


class DedupeStore(Protocol):
    async def seen(self, key: str) -> bool:
        """Record ``key``; True when it had been recorded before."""

    async def has_seen(self, key: str) -> bool:
        """Whether ``key`` is recorded, without recording it."""

    async def forget(self, key: str) -> None:
        """Undo :meth:`seen` for a message that was not accepted."""


class MemoryDedupe:
    """Bounded, TTL-limited memory of recent keys (per process)."""

    def __init__(self, ttl_seconds: float = 3600.0, max_entries: int = 50_000) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._keys: OrderedDict[str, float] = OrderedDict()

    async def seen(self, key: str) -> bool:
        now = time.monotonic()
        while self._keys:  # the expired ones go first
            oldest, at = next(iter(self._keys.items()))
            if now - at < self.ttl:
                break
            del self._keys[oldest]
        if key in self._keys:
            return True
        # Room is made only for a new key: a repeat of the oldest key of a full store must
        # still be a duplicate, not evict itself and pass as new.
        while len(self._keys) >= self.max_entries:
            self._keys.popitem(last=False)
        self._keys[key] = now
        return False

    async def has_seen(self, key: str) -> bool:
        at = self._keys.get(key)
        return at is not None and time.monotonic() - at < self.ttl

    async def forget(self, key: str) -> None:
        self._keys.pop(key, None)


async def first_delivery(store: DedupeStore, key: str) -> bool:
    """Record a message that is not stored in the inbox (a command, a refusal's reply, the
    terminal chat) as processed; False for a platform's redelivery. Stored messages are
    deduped by the inbox insert itself, in the same transaction
    (:meth:`bot.storage.inbox.SqlInbox.accept`).

    Raises ``NotAccepted`` when the record can't be written: the platform delivers again.
    """
    try:
        duplicate = await store.seen(key)
    except Exception as exc:
        log.error("inbound.not_accepted", reason="dedupe_failed", error=str(exc))
        raise NotAccepted("the database is unavailable") from exc
    if duplicate:
        log.info("inbound.duplicate", key=key)
    return not duplicate
