"""Traces written behind the runs: saving one costs the run nothing but a hand-over.

A trace is diagnostic data read by people later (``loopgate traces``, the dashboard, the
evolution metrics), while a reply waits for everything on its own path. So ``save_trace`` queues
the trace's rows here and returns; one task writes whatever has queued (on Postgres, within
:data:`WRITE_DELAY` of the first) in one transaction, and goes on while more arrive. Under
load many runs' traces share a transaction. Without the delay, each of three processes
answering ~35 replies a second wrote two traces a transaction, ~150 transactions where one
process under the whole load wrote ~60 (``benchmarks/cluster.py``, issue 33); with it, ~35.

Every reader flushes first (:meth:`TraceWriter.flush`, which does not wait out the delay), so
within the process a trace is readable once ``save_trace`` has returned, as before;
``Database.aclose`` flushes too; another process (``loopgate traces``) sees it within the
delay. What a crash (not a shutdown) loses is the traces queued in the last moment, as with any
tracing exporter (OpenTelemetry's batch processor waits five seconds); a failed write is logged
(``trace.save_failed``) and dropped, as a failed save always was.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog
from sqlalchemy import Connection, bindparam, delete, insert
from sqlalchemy.exc import IntegrityError

from bot.storage._sql import table_of
from bot.storage.models import SpanRow, TraceRow

T = TypeVar("T")


class WriteLane(Protocol):
    """Where a trace batch is written: one write transaction
    (:meth:`bot.storage._db.Database.run_write`)."""

    async def run_write(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T: ...


log = structlog.get_logger(__name__)

REMEMBERED_IDS = 1_000
"""Trace ids written by this process that are remembered: saving one of them again replaces
its rows (delete first); a new trace, the usual case, is inserted without the deletes. A trace
is saved again moments after its first save, if at all, and one forgotten meanwhile is still
replaced (the insert's IntegrityError), so a short memory will do: 10,000 ids held 2.3 MiB."""

WRITE_DELAY = 0.2
"""Seconds the first trace queued waits for others to share its transaction, on Postgres
(``Database`` gives SQLite none). Short: the queued traces are held in memory meanwhile."""
MAX_BATCH = 256
"""Traces queued at which the write starts without waiting out the delay."""

_TRACES, _SPANS = table_of(TraceRow), table_of(SpanRow)
_DELETE_SPANS = delete(_SPANS).where(_SPANS.c.trace_id == bindparam("old_id"))
_DELETE_TRACE = delete(_TRACES).where(_TRACES.c.id == bindparam("old_id"))
_INSERT_TRACE = insert(_TRACES)
_INSERT_SPAN = insert(_SPANS)


@dataclass(frozen=True, slots=True)
class TraceRows:
    """One trace as rows: the ``traces`` row and its spans' rows."""

    trace: dict[str, Any]
    spans: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return str(self.trace["id"])


class TraceWriter:
    """The database's queue of traces to write (one per :class:`~bot.storage._db.Database`)."""

    def __init__(self, db: WriteLane, *, delay: float = WRITE_DELAY) -> None:
        self._db = db
        self._delay = delay
        self._gathering: asyncio.Future[None] | None = None
        self._hurry_through = 0
        """Saves up to this count are awaited by a reader: written without the delay."""
        self._queued: dict[str, TraceRows] = {}
        self._task: asyncio.Task[None] | None = None
        self._written: OrderedDict[str, None] = OrderedDict()
        # Saves handed over and saves settled (written or failed), counted so that a reader
        # waits for what was queued before it asked, not for a queue that never empties.
        self._submitted = self._settled = self._in_queue = 0
        self._progress = asyncio.Event()

    @property
    def queued(self) -> int:
        return len(self._queued)

    def submit(self, rows: TraceRows) -> None:
        """Queue ``rows`` (replacing a queued earlier save of the same trace)."""
        self._queued[rows.id] = rows
        self._submitted += 1
        self._in_queue += 1
        if len(self._queued) >= MAX_BATCH:
            self._hurry()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._drain(), name="storage:traces"
            )
            self._task.add_done_callback(lambda _: self._progressed())

    async def flush(self) -> None:
        """Return once every save handed over before this call is written (or has failed).

        Waiting does not touch the writing task: a reader that is cancelled cancels no write.
        """
        target = self._hurry_through = self._submitted
        self._hurry()
        while self._settled < target:
            if self._task is None or self._task.done():
                return  # the writer was cancelled (shutdown): nothing more will settle
            await self._progress.wait()

    def _progressed(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    def _hurry(self) -> None:
        if self._gathering is not None and not self._gathering.done():
            self._gathering.set_result(None)

    async def _gather(self) -> None:
        """Wait up to the delay for more traces, unless a reader or a full batch waits."""
        hurried = self._settled < self._hurry_through or len(self._queued) >= MAX_BATCH
        if self._delay <= 0 or hurried:
            return
        loop = asyncio.get_running_loop()
        self._gathering = loop.create_future()
        timer = loop.call_later(self._delay, self._hurry)
        try:
            await self._gathering
        finally:
            timer.cancel()
            self._gathering = None

    async def _drain(self) -> None:
        while self._queued:
            await self._gather()
            batch, self._queued = list(self._queued.values()), {}
            saves, self._in_queue = self._in_queue, 0
            try:
                try:
                    await self._write(batch)
                except IntegrityError:  # one was saved before, by an earlier process
                    await self._write(batch, replace=True)
            except Exception:
                log.exception("trace.save_failed", traces=len(batch))
            else:
                log.debug("storage.trace_saved", trace_ids=[rows.id for rows in batch])
            finally:
                self._settled += saves
                self._progressed()

    async def _write(self, batch: list[TraceRows], *, replace: bool = False) -> None:
        again = [{"old_id": r.id} for r in batch if replace or r.id in self._written]
        spans = [span for rows in batch for span in rows.spans]
        traces = [rows.trace for rows in batch]

        def write(conn: Connection) -> None:
            if again:  # saved before (a retry): replaced, not duplicated
                conn.execute(_DELETE_SPANS, again)
                conn.execute(_DELETE_TRACE, again)
            conn.execute(_INSERT_TRACE, traces)
            if spans:  # after the traces they reference
                conn.execute(_INSERT_SPAN, spans)

        await self._db.run_write(write)
        for rows in batch:
            self._written[rows.id] = None
            self._written.move_to_end(rows.id)
        while len(self._written) > REMEMBERED_IDS:
            self._written.popitem(last=False)
