"""Run traces in SQL: the agent core's ``TraceStore`` plus reading recent traces back.

A spawned or delegated run has a trace of its own that names its parent trace and the tool span
that started it (``parent_trace_id``/``parent_span_id``): ``recent_traces`` lists top-level runs
only, and ``children_of`` fetches the next level so ``loopgate traces`` can print the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlalchemy import Connection, Row, Select, or_, select

from agent_core import Span, SpanKind, Trace
from bot.redaction import redact, redact_tree
from bot.storage._db import Database
from bot.storage._sql import clean
from bot.storage._trace_writer import TraceRows
from bot.storage.models import SpanRow, TraceRow

MAX_DEPTH = 5
"""How many levels of runs started by runs (``delegate``, ``spawn``) a trace tree shows."""


class SqlTraceStore:
    """Implements :class:`agent_core.store.TraceStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def save_trace(self, trace: Trace) -> None:
        """Queue the trace and all its spans to be written in one transaction, replacing an
        earlier save; every reader here (and ``Database.aclose``) waits for the queue."""
        preview = trace.root.attributes.get("input_preview") if trace.spans else None
        row = {
            "id": trace.id,
            "run_id": trace.run_id,
            "session_key": trace.session_key,
            "agent_id": trace.agent_id,
            "status": trace.status,
            "started_at": trace.started_at,
            "ended_at": trace.ended_at,
            "input_tokens": trace.input_tokens,
            "output_tokens": trace.output_tokens,
            "error": _stored(trace.error) if trace.error is not None else None,
            "output_preview": _stored(trace.output_preview),
            "input_preview": _stored(str(preview)) if preview is not None else None,
            "parent_trace_id": trace.parent_trace_id,
            "parent_span_id": trace.parent_span_id,
        }
        spans = [_span_row(trace.id, i, span) for i, span in enumerate(trace.spans)]
        # Written behind the run, batched with other runs' traces (trace_writer.py).
        self._db.trace_writer.submit(TraceRows(row, spans))

    async def recent_traces(
        self, *, session_key: str | None = None, limit: int = 10
    ) -> list[Trace]:
        """The newest top-level traces first (child runs are reached through
        :meth:`children_of`), each with its spans in the order they started."""
        query = (
            select(TraceRow)
            .where(TraceRow.parent_trace_id.is_(None))
            .order_by(TraceRow.started_at.desc(), TraceRow.id)
            .limit(limit)
        )
        if session_key is not None:
            query = query.where(TraceRow.session_key == session_key)
        return await self._load(query)

    async def get(self, trace_or_run_id: str) -> Trace | None:
        """One trace by its id or by its run's id (a run has one trace), with its spans."""
        query = (
            select(TraceRow)
            .where(or_(TraceRow.id == trace_or_run_id, TraceRow.run_id == trace_or_run_id))
            .limit(1)
        )
        found = await self._load(query)
        return found[0] if found else None

    async def children_of(self, trace_ids: Sequence[str]) -> list[Trace]:
        """The direct child traces of ``trace_ids`` (runs their tool calls started), oldest
        first, each with its spans."""
        if not trace_ids:
            return []
        query = (
            select(TraceRow)
            .where(TraceRow.parent_trace_id.in_(list(trace_ids)))
            .order_by(TraceRow.started_at, TraceRow.id)
        )
        return await self._load(query)

    async def _load(self, query: Select[Any]) -> list[Trace]:
        await self._db.trace_writer.flush()
        return await self._db.run_read(partial(_load_traces, query=query))


def _load_traces(conn: Connection, *, query: Select[Any]) -> list[Trace]:
    """The traces ``query`` selects, each with its spans."""
    rows = conn.execute(query).all()
    spans = _spans_of(conn, [r.id for r in rows])
    return [_to_trace(r, spans[r.id]) for r in rows]


def _spans_of(conn: Connection, trace_ids: list[str]) -> dict[str, list[Span]]:
    spans: dict[str, list[Span]] = {trace_id: [] for trace_id in trace_ids}
    if trace_ids:
        span_rows = conn.execute(
            select(SpanRow)
            .where(SpanRow.trace_id.in_(trace_ids))
            .order_by(SpanRow.trace_id, SpanRow.position)
        )
        for sr in span_rows:
            spans[sr.trace_id].append(_to_span(sr))
    return spans


def _stored(text: str) -> str:
    """Text as a trace keeps it: configured secrets masked, since errors and tool results can
    quote one and traces are shown to operators (``loopgate traces``); NULs replaced."""
    return clean(redact(text))


def _span_row(trace_id: str, position: int, span: Span) -> dict[str, Any]:
    return {
        "id": span.id,
        "trace_id": trace_id,
        "position": position,
        "parent_id": span.parent_id,
        "kind": str(span.kind),
        "name": _stored(span.name),
        "started_at": span.started_at,
        "duration_ms": span.duration_ms,
        "error": span.error,
        "attributes": redact_tree(span.attributes),
    }


def _to_span(row: Row[Any]) -> Span:
    return Span(
        id=row.id,
        kind=SpanKind(row.kind),
        name=row.name,
        started_at=row.started_at,
        parent_id=row.parent_id,
        duration_ms=row.duration_ms,
        error=row.error,
        attributes=dict(row.attributes),
    )


def _to_trace(row: Row[Any], spans: list[Span]) -> Trace:
    return Trace(
        id=row.id,
        run_id=row.run_id,
        session_key=row.session_key,
        agent_id=row.agent_id,
        started_at=row.started_at,
        status=row.status,
        ended_at=row.ended_at,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        error=row.error,
        output_preview=row.output_preview,
        spans=spans,
        parent_trace_id=row.parent_trace_id,
        parent_span_id=row.parent_span_id,
    )


async def child_traces(
    store: SqlTraceStore, parents: Sequence[Trace], *, depth: int = MAX_DEPTH
) -> dict[str, list[Trace]]:
    """The runs started by ``parents`` and by their children, ``depth`` levels down, keyed by
    the span that started each (what :func:`render_tree` takes). A child whose span is not in
    its parent's trace (e.g. the parent was cut short) goes under the parent's root span."""
    by_span: dict[str, list[Trace]] = {}
    seen = {t.id for t in parents}
    level = list(parents)
    for _ in range(depth):
        found = [t for t in await store.children_of([p.id for p in level]) if t.id not in seen]
        if not found:
            break
        by_id = {p.id: p for p in level}
        for child in found:
            seen.add(child.id)
            parent = by_id[child.parent_trace_id or ""]
            spans = {s.id for s in parent.spans}
            key = child.parent_span_id if child.parent_span_id in spans else None
            if key is None and parent.spans:
                key = parent.root.id
            if key is not None:
                by_span.setdefault(key, []).append(child)
        level = found
    return by_span
