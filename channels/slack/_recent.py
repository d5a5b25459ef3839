"""Bounded in-memory records of recent things (events, threads, statuses).

A long-running bot sees an unbounded stream of events; these forget the oldest entries instead
of growing forever. Losing an old entry is harmless: the persistent dedupe and a fresh Slack
lookup cover what memory no longer knows.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

RECENT_KEYS = 20_000  # in-memory dedupe window (events and posts)


class BoundedDict(OrderedDict[K, V]):
    """A dict that forgets its least recently written entries beyond ``limit``."""

    def __init__(self, limit: int = RECENT_KEYS) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


class RecentKeys:
    """Bounded memory of recently seen keys (insertion order = age)."""

    def __init__(self, limit: int = RECENT_KEYS) -> None:
        self.limit = limit
        self._keys: OrderedDict[str, None] = OrderedDict()

    def seen(self, key: str) -> bool:
        if key in self._keys:
            return True
        self._keys[key] = None
        if len(self._keys) > self.limit:
            self._keys.popitem(last=False)
        return False

    def forget(self, key: str) -> None:
        self._keys.pop(key, None)
