"""What the dashboard reads from the database: sessions and their messages, traces as trees,
channel health and the inbox. Each function returns JSON-ready data, which the pages render
and ``/admin/api/`` returns as is.

Message texts and tool results are masked like logs are (:func:`bot.redaction.redact`): the
operator reads conversations here, not the service's own secrets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, func, select

from agent_core import Span, Trace
from bot.app import Loopgate
from bot.http.health import health_report
from bot.pipeline.session_keys import chat_of
from bot.redaction import redact, redact_tree
from bot.storage import SqlTraceStore
from bot.storage.inbox import InboxEntry
from bot.storage.models import MessageRow, SessionRow, utcnow
from bot.storage.traces import child_traces

MAX_LIMIT = 500


def clamp(value: str | None, default: int) -> int:
    """A ``?limit=``/``?last=`` query value, within 1..MAX_LIMIT."""
    try:
        number = int(value) if value else default
    except ValueError:
        number = default
    return max(1, min(number, MAX_LIMIT))


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def sessions(loopgate: Loopgate, *, limit: int = 100) -> list[dict[str, Any]]:
    """The most recently active sessions first, with their message counts."""
    counts = (
        select(MessageRow.session_key, func.count(MessageRow.id).label("messages"))
        .group_by(MessageRow.session_key)
        .subquery()
    )
    query = (
        select(SessionRow, func.coalesce(counts.c.messages, 0).label("messages"))
        .outerjoin(counts, counts.c.session_key == SessionRow.key)
        .order_by(SessionRow.updated_at.desc())
        .limit(limit)
    )
    rows = await loopgate.db.run_read(lambda conn: conn.execute(query).all())
    return [_session(row, int(row.messages)) for row in rows]


def _session(row: Row[Any], messages: int) -> dict[str, Any]:
    # Rows written by the loop leave agent and channel empty: the key names both.
    chat = chat_of(row.key)
    return {
        "key": row.key,
        "agent_id": row.agent_id or row.key.split(":")[1],
        "channel": row.channel or (chat.channel if chat else ""),
        "chat_type": chat.chat_type.value if chat else "",
        "chat_id": chat.chat_id if chat else "",
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "model": row.model,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "compactions": row.compaction_count,
        "messages": messages,
    }


async def session_messages(
    loopgate: Loopgate, key: str, *, limit: int = 200
) -> dict[str, Any] | None:
    """The session's newest ``limit`` messages, oldest first; None for an unknown session."""
    found = await loopgate.db.run_read(lambda conn: _session_and_messages(conn, key, limit))
    if found is None:
        return None
    session, rows = found
    messages = [
        {
            "id": row.id,
            "run_id": row.run_id,
            "role": row.role,
            "content": redact(row.content),
            "tool_calls": redact_tree(row.tool_calls or []),
            "tool_call_id": row.tool_call_id,
            "name": row.name,
            "created_at": iso(row.created_at),
        }
        for row in reversed(rows)
    ]
    return {
        **_session(session, len(messages)),
        "summary": redact(session.summary) if session.summary else None,
        "messages": messages,
    }


def _session_and_messages(
    conn: Connection, key: str, limit: int
) -> tuple[Row[Any], list[Row[Any]]] | None:
    session = conn.execute(select(SessionRow).where(SessionRow.key == key)).one_or_none()
    if session is None:
        return None
    rows = conn.execute(
        select(MessageRow)
        .where(MessageRow.session_key == key)
        .order_by(MessageRow.id.desc())
        .limit(limit)
    ).all()
    return session, list(rows)


def _trace_summary(trace: Trace) -> dict[str, Any]:
    took = None
    if trace.ended_at is not None:
        took = round((trace.ended_at - trace.started_at).total_seconds() * 1000, 1)
    return {
        "id": trace.id,
        "run_id": trace.run_id,
        "session_key": trace.session_key,
        "agent_id": trace.agent_id,
        "status": trace.status,
        "started_at": iso(trace.started_at),
        "ended_at": iso(trace.ended_at),
        "duration_ms": took,
        "input_tokens": trace.input_tokens,
        "output_tokens": trace.output_tokens,
        "error": trace.error,
        "output_preview": trace.output_preview,
    }


async def recent_traces(
    loopgate: Loopgate, *, last: int = 20, session: str | None = None
) -> list[dict[str, Any]]:
    store = SqlTraceStore(loopgate.db)
    return [_trace_summary(t) for t in await store.recent_traces(session_key=session, limit=last)]


async def trace_tree(loopgate: Loopgate, trace_or_run_id: str) -> dict[str, Any] | None:
    """One run's trace with its spans nested under their parents, and the runs it started
    (spawn, delegate, team tasks) nested under the span that started each, recursively."""
    store = SqlTraceStore(loopgate.db)
    trace = await store.get(trace_or_run_id)
    if trace is None:
        return None
    return _tree(trace, await child_traces(store, [trace]), {trace.id})


def _tree(trace: Trace, children: dict[str, list[Trace]], seen: set[str]) -> dict[str, Any]:
    under: dict[str | None, list[Span]] = {}
    for span in trace.spans:
        under.setdefault(span.parent_id, []).append(span)

    def node(span: Span) -> dict[str, Any]:
        runs = []
        for child in children.get(span.id, ()):
            if child.id not in seen:  # hand-edited data must not make a cycle
                seen.add(child.id)
                runs.append(_tree(child, children, seen))
        attributes = span.attributes
        return {
            "id": span.id,
            "kind": str(span.kind),
            "name": span.name,
            "started_at": iso(span.started_at),
            "duration_ms": round(span.duration_ms, 1),
            "error": span.error,
            "input_tokens": attributes.get("input_tokens"),
            "output_tokens": attributes.get("output_tokens"),
            "attributes": attributes,
            "spans": [node(s) for s in under.get(span.id, [])],
            "runs": runs,
        }

    return {**_trace_summary(trace), "spans": [node(s) for s in under.get(None, [])]}


async def channels(loopgate: Loopgate, *, last: int = 50) -> dict[str, Any]:
    """Health as ``/healthz`` reports it, plus the messages the inbox did not answer."""
    health, _status = await health_report(loopgate)
    entries: list[InboxEntry] = []
    if loopgate.inbox is not None and health.get("database") == "ok":
        entries = await loopgate.inbox.unanswered(limit=last)
    now = utcnow()
    return {
        "health": health,
        "inbox": [_inbox_entry(entry, now) for entry in entries],
    }


def _inbox_entry(entry: InboxEntry, now: datetime) -> dict[str, Any]:
    return {
        "id": entry.id,
        "state": entry.state.value,
        "channel": entry.channel,
        "session_key": entry.session_key,
        "agent_id": entry.agent_id,
        "text": redact(entry.message.text[:500]),
        "reason": entry.reason,
        "attempts": entry.attempts,
        "received_at": iso(entry.received_at),
        "age_s": round(max(0.0, (now - entry.received_at).total_seconds())),
        "parts_delivered": len(entry.parts),
    }
