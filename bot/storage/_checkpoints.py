"""SQLite WAL checkpoints in the background, not inside a reply's commit.

SQLite copies the write-ahead log back into the database file (a checkpoint, with its fsyncs)
inside whichever commit pushes the log past 1,000 pages. That commit holds the one writer slot
(``writer.py``) for tens of milliseconds meanwhile, and the next message's intake waits behind
it: it was the slowest reply of every benchmark run (docs/performance.md). So the service's
connections turn the automatic checkpoint off (``PRAGMA wal_autocheckpoint=0``) and, after every
``EVERY_WRITES`` write transactions, this runs ``PASSIVE`` checkpoints on a read lane's
connection: they copy beside the writers and readers and wait for none of them.

The log is written over from its start only by a write that begins after a checkpoint caught up
with it, so a round counts as done when it copied everything while no write was under way; it
is tried again a moment later otherwise. Writes that never pause would let the log grow: past
``MAX_LOG_FRAMES`` one checkpoint takes the writer slot (behind urgent writes) to catch up, as
SQLite's own would have, a few times less often. A process that closes its last connection
checkpoints as SQLite always does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from bot.storage._writer import WriterQueue

log = structlog.get_logger(__name__)

EVERY_WRITES = 200
"""Write transactions between checkpoints: a reply makes about five, each a few pages of log,
so the log stays around the size SQLite's own threshold keeps it at."""
CATCH_UP_ROUNDS = 10
RETRY_AFTER = 0.05
"""Rounds, this many seconds apart, to catch up with writes landing meanwhile."""
MAX_LOG_FRAMES = 4_096
"""A log this long (16 MiB of 4 KiB pages) is checkpointed under the writer slot."""


class WalCheckpoints:
    """Counts a database's write transactions and checkpoints it in the background."""

    def __init__(
        self, passive: Callable[[], Awaitable[tuple[int, int]]], writer: WriterQueue
    ) -> None:
        """``passive``: runs ``PRAGMA wal_checkpoint(PASSIVE)`` on a connection that is not
        the writer's and returns the log's frames and the frames copied (-1 when not in WAL)."""
        self._passive = passive
        self._writer = writer
        self._commits = 0
        self._due = EVERY_WRITES
        self._task: asyncio.Task[None] | None = None
        self.done = 0
        """Checkpoints that caught up with the log so far (tests, diagnostics)."""

    def wrote(self) -> None:
        """One write transaction committed."""
        self._commits += 1
        if self._commits < self._due or (self._task is not None and not self._task.done()):
            return
        self._due = self._commits + EVERY_WRITES
        self._task = asyncio.get_running_loop().create_task(
            self._checkpoint(), name="storage:checkpoint"
        )

    async def _checkpoint(self) -> None:
        try:
            for _ in range(CATCH_UP_ROUNDS):
                commits = self._commits
                frames, copied = await self._passive()
                if copied >= frames and commits == self._commits and not self._writer.busy:
                    self.done += 1  # the next write starts the log over
                    return
                await asyncio.sleep(RETRY_AFTER)
            if frames > MAX_LOG_FRAMES:
                async with self._writer.hold():  # nothing is appended meanwhile
                    frames, copied = await self._passive()
                self.done += 1
                log.info("storage.checkpoint_caught_up", frames=frames, copied=copied)
        except Exception as exc:  # the next one copies what this one did not
            log.warning("storage.checkpoint_failed", error=repr(exc))

    async def aclose(self) -> None:
        """Stop a checkpoint under way: the connections are about to close, and the last
        one's close checkpoints anyway."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
