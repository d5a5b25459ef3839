"""Remembering inbound message ids so a platform retry is processed once."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol


class DedupeStore(Protocol):
    async def seen(self, key: str) -> bool:
        """Record ``key``; True when it had been recorded before."""

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
        while self._keys:
            oldest, at = next(iter(self._keys.items()))
            if now - at < self.ttl and len(self._keys) < self.max_entries:
                break
            del self._keys[oldest]
        if key in self._keys:
            return True
        self._keys[key] = now
        return False

    async def forget(self, key: str) -> None:
        self._keys.pop(key, None)
