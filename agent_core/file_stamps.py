"""Files' stamps (inode, size, modification and change time) and a cache of what was read from
files, kept while none of their stamps changes.

Why: every run's prompt reads a dozen workspace files and lists the skill folders. Done in a
worker thread, that cost about 0.7 ms of CPU per reply (the hop, and the GIL passed back and
forth at each read) where checking that nothing changed costs a stat per file on the event
loop.

A file rewritten within one tick of the filesystem's clock can keep its stamp (git's "racily
clean" files): what was read while one of its files had changed less than a tick or two
before is returned but not kept, so such a change is always read again. Linux stamps files
from a clock that ticks every 1 to 10 ms; filesystems that keep whole milliseconds, seconds
or two seconds (network shares, FAT) are recognised by their round change times.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

FileKey = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns

SETTLE_NS = 20_000_000
"""How long after its last change a file's stamp is trusted: two ticks of a 100 Hz clock."""
COARSE_SETTLE_NS = 2_000_000_000
"""The same where a change time is a whole number of milliseconds: a coarser filesystem."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def file_key(path: str) -> FileKey | None:
    """``path``'s key (following links), or ``None`` when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in the name
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def coarse_time(change_ns: int) -> bool:
    """Whether a change time is a whole number of milliseconds: a coarse filesystem's."""
    return change_ns % 1_000_000 == 0


def trusted(change_ns: int, now_ns: int) -> bool:
    """Whether a file last changed at ``change_ns`` can keep no unseen rewrite at ``now_ns``
    (a change time from the same tick would look the same)."""
    return change_ns <= now_ns - (COARSE_SETTLE_NS if coarse_time(change_ns) else SETTLE_NS)


def digest(paths: Iterable[str]) -> int:
    """One number for the keys of all ``paths`` (a missing file's too): a digest rather than
    the keys, so that a kept value costs a few bytes more, not a tuple per file."""
    return hash(tuple(map(file_key, paths)))


@dataclass(frozen=True, slots=True)
class Stamp:
    """What files looked like at ``taken_ns`` (``time.time_ns()``): their :func:`digest`,
    and the newest change time among them."""

    digest: int
    changed_ns: int
    taken_ns: int
    coarse: bool = False  # a change time was a whole number of milliseconds

    def settled(self, settle_ns: int | None = None) -> bool:
        """Whether every file last changed ``settle_ns`` (by default the filesystem's) or more
        before the stamp. The change time, not the modification time: nothing but the kernel
        sets it."""
        if settle_ns is None:
            settle_ns = COARSE_SETTLE_NS if self.coarse else SETTLE_NS
        return self.changed_ns <= self.taken_ns - settle_ns


def stamp(paths: Iterable[str]) -> Stamp:
    """Take before reading: a change made after the stamp but before the read is then seen
    as a change next time, never missed."""
    taken_ns = time.time_ns()
    keys = tuple(map(file_key, paths))
    changes = [key[3] for key in keys if key is not None]
    coarse = any(map(coarse_time, changes))
    return Stamp(hash(keys), max(changes, default=0), taken_ns, coarse)


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    digest: int
    size: int


class StampedCache(Generic[K, V]):
    """Values read from files, by key, for as long as their files' stamps hold. Beyond
    ``max_entries`` entries or ``max_size`` (the sum of the sizes given to :meth:`put`) the
    least recently used go first. One event loop's: not thread-safe."""

    def __init__(self, max_entries: int, max_size: int, *, settle_ns: int | None = None) -> None:
        self.max_entries = max_entries
        self.max_size = max_size
        self.settle_ns = settle_ns
        self._entries: dict[K, _Entry[V]] = {}
        self._size = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, paths: Callable[[V], Iterable[str]]) -> V | None:
        """The value kept for ``key`` if none of its files (``paths(value)``, the paths it was
        stamped with, in the same order) changed: a stat each. Else ``None``."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        if digest(paths(entry.value)) != entry.digest:
            self._size -= entry.size
            return None
        self._entries[key] = entry  # the most recently used last
        return entry.value

    def put(self, key: K, value: V, stamp: Stamp, *, size: int) -> None:
        """Keep ``value``, read after ``stamp`` was taken, unless one of its files changed too
        recently to trust the stamp."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= old.size
        if size > self.max_size or not stamp.settled(self.settle_ns):
            return
        self._entries[key] = _Entry(value, stamp.digest, size)
        self._size += size
        while len(self._entries) > self.max_entries or self._size > self.max_size:
            self._size -= self._entries.pop(next(iter(self._entries))).size
