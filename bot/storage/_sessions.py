"""Conversation history in SQL: the agent core's ``SessionStore`` plus compaction helpers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import (
    JSON,
    BigInteger,
    Connection,
    Executable,
    Integer,
    Row,
    String,
    Text,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal_column,
    null,
    select,
    true,
    union_all,
    update,
)

from agent_core import Message, SessionHistory, ToolCall, Usage
from bot.storage._db import Database
from bot.storage._errors import SessionNotFound
from bot.storage._sql import clean, clean_optional, dialect_insert, dump_json, table_of
from bot.storage.models import MessageRow, SessionRow, SummaryRow, utcnow

log = structlog.get_logger(__name__)

_SUMMARY = select(SessionRow.summary).where(SessionRow.key == bindparam("key"))
_HISTORY = (
    select(
        MessageRow.role,
        MessageRow.content,
        MessageRow.tool_calls,
        MessageRow.tool_call_id,
        MessageRow.name,
    )
    .where(MessageRow.session_key == bindparam("key"))
    .order_by(MessageRow.id)
)
_HISTORY_PG: Executable = union_all(
    # Postgres: the summary and the messages in one round trip. The session's row comes
    # first (part 0) and only if the session exists; its content is the summary. Not on
    # SQLite, where both reads are already one hop to the read lane: there this statement
    # peaked ~0.3 MiB higher for the same CPU (benchmarks/ab.py, three pairs).
    select(
        literal_column("0", Integer()).label("part"),
        literal_column("0", BigInteger()).label("id"),
        literal_column("''", String()).label("role"),
        SessionRow.summary.label("content"),
        cast(null(), JSON()).label("tool_calls"),
        cast(null(), String()).label("tool_call_id"),
        cast(null(), String()).label("name"),
    ).where(SessionRow.key == bindparam("key")),
    select(
        literal_column("1", Integer()),
        MessageRow.id,
        MessageRow.role,
        MessageRow.content,
        MessageRow.tool_calls,
        MessageRow.tool_call_id,
        MessageRow.name,
    ).where(MessageRow.session_key == bindparam("key")),
).order_by(literal_column("part"), literal_column("id"))
_INSERT_MESSAGE = insert(table_of(MessageRow))
if TYPE_CHECKING:
    # role, content, tool_calls, tool_call_id, name (their JSON and NULLs read as Any)
    _HistoryRow = Row[*tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    key: str
    agent_id: str
    user_id: str
    channel: str
    created_at: datetime
    updated_at: datetime
    model: str
    provider: str
    usage: Usage
    compaction_count: int
    summary: str | None


class SqlSessionStore:
    """Implements :class:`agent_core.store.SessionStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def load_history(self, session_key: str) -> SessionHistory:
        # Columns through a plain connection, not ORM objects: read before every run.
        params = {"key": session_key}
        if self._db.dialect == "postgresql":
            return await self._db.run_read(lambda conn: _history(conn.execute(_HISTORY_PG, params)))

        def read(conn: Connection) -> SessionHistory:
            summary = conn.scalar(_SUMMARY, params)
            rows = conn.execute(_HISTORY, params)
            return SessionHistory(messages=[_to_message(r) for r in rows], summary=summary)

        return await self._db.run_read(read)

    async def append_run(
        self,
        session_key: str,
        messages: list[Message],
        *,
        run_id: str,
        usage: Usage,
        model: str,
        provider: str,
        agent_id: str = "",
        user_id: str = "",
        channel: str = "",
    ) -> None:
        """Write the run's messages and add its usage, all or nothing.

        ``agent_id``/``user_id``/``channel`` are recorded when the session row is created and
        left alone afterwards.
        """
        now = utcnow()
        session = {
            "key": session_key,
            "agent_id": agent_id,
            "user_id": user_id,
            "channel": channel,
            "created_at": now,
            "updated_at": now,
            "model": model,
            "provider": provider,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "compaction_count": 0,
        }
        rows = [_to_row(session_key, run_id, m, now) for m in messages]
        if self._db.dialect == "postgresql" and rows:
            params = {**session, **_message_arrays(rows), "run_id": run_id, "now": now}
            await self._db.run_statement(lambda conn: conn.execute(_append_run_pg(), params))
            log.debug(
                "storage.run_appended", session_key=session_key, run_id=run_id, count=len(rows)
            )
            return
        upsert = _upsert_session(self._db.dialect)

        def append(conn: Connection) -> None:
            conn.execute(upsert, session)
            if rows:
                conn.execute(_INSERT_MESSAGE, rows)

        await self._db.run_write(append)
        log.debug("storage.run_appended", session_key=session_key, run_id=run_id, count=len(rows))

    async def get_session(self, session_key: str) -> SessionInfo | None:
        row = await self._db.run_read(partial(_session_row, key=session_key))
        return None if row is None else _to_info(row)

    async def reset_session(self, session_key: str) -> int:
        """Forget the conversation (messages, summary, compaction history); keep usage totals.

        Returns how many messages were deleted.
        """
        deleted = await self._db.run_write(partial(_reset, key=session_key))
        log.info("storage.session_reset", session_key=session_key, deleted=deleted)
        return deleted

    async def set_summary(self, session_key: str, summary: str, keep_last: int) -> int:
        """Replace all but the last ``keep_last`` messages by ``summary``; returns how many went.

        Raises :class:`SessionNotFound` when the session has never been written.
        """
        if keep_last < 0:
            raise ValueError("keep_last must be >= 0")
        work = partial(
            _compact, key=session_key, summary=clean(summary), keep_last=keep_last, now=utcnow()
        )
        removed = await self._db.run_write(work)
        log.info("storage.session_compacted", session_key=session_key, removed=removed)
        return removed


def _session_row(conn: Connection, *, key: str) -> Row[Any] | None:
    return conn.execute(select(SessionRow).where(SessionRow.key == key)).first()


def _reset(conn: Connection, *, key: str) -> int:
    """:meth:`SqlSessionStore.reset_session`'s transaction; returns the messages deleted."""
    result = conn.execute(delete(MessageRow).where(MessageRow.session_key == key))
    conn.execute(delete(SummaryRow).where(SummaryRow.session_key == key))
    conn.execute(
        update(SessionRow).where(SessionRow.key == key).values(summary=None, updated_at=utcnow())
    )
    return result.rowcount


def _compact(conn: Connection, *, key: str, summary: str, keep_last: int, now: datetime) -> int:
    """:meth:`SqlSessionStore.set_summary`'s transaction; returns the messages removed."""
    # Write first: on SQLite this takes the write lock before the reads below, so a
    # concurrent writer makes us wait (busy_timeout) instead of failing the upgrade.
    touched = conn.execute(
        update(SessionRow)
        .where(SessionRow.key == key)
        .values(
            summary=summary,
            compaction_count=SessionRow.compaction_count + 1,
            updated_at=now,
        )
    )
    if touched.rowcount == 0:
        raise SessionNotFound(key)  # rolls the transaction back
    cut = _first_kept_id(conn, key, keep_last)
    stale = delete(MessageRow).where(MessageRow.session_key == key)
    if cut is not None:
        stale = stale.where(MessageRow.id < cut)
    removed = conn.execute(stale).rowcount
    conn.execute(
        insert(SummaryRow).values(
            session_key=key, content=summary, message_count=removed, created_at=now
        )
    )
    return removed


def _first_kept_id(conn: Connection, session_key: str, keep_last: int) -> int | None:
    """Id of the oldest message to keep, or None to drop them all."""
    if keep_last == 0:
        return None
    tail = conn.execute(
        select(MessageRow.id, MessageRow.role)
        .where(MessageRow.session_key == session_key)
        .order_by(MessageRow.id.desc())
        .limit(keep_last)
    ).all()
    kept = list(reversed(tail))
    # A tool result whose assistant tool call was summarised away is rejected by providers,
    # so the kept tail must not start with tool results.
    while kept and kept[0].role == "tool":
        kept.pop(0)
    return int(kept[0].id) if kept else None


@cache
def _upsert_session(dialect: str) -> Executable:
    """The session row of a run: created, or its usage added to. Increment in SQL, not
    read-modify-write in Python, so concurrent runs of a session cannot lose each other's
    usage; who created it (agent, user, channel) is left alone."""
    table = table_of(SessionRow)
    upsert = dialect_insert(dialect, table)
    return upsert.on_conflict_do_update(
        index_elements=[table.c.key],
        set_={
            "updated_at": upsert.excluded.updated_at,
            "model": upsert.excluded.model,
            "provider": upsert.excluded.provider,
            "input_tokens": table.c.input_tokens + upsert.excluded.input_tokens,
            "output_tokens": table.c.output_tokens + upsert.excluded.output_tokens,
        },
    )


@cache
def _append_run_pg() -> Executable:
    """Postgres: the session's upsert and the run's messages in **one** statement (the upsert
    as a data-modifying CTE, the messages unnested from one array per column, in order), one
    round trip where a transaction took four (BEGIN, upsert, insert, COMMIT). As atomic: one
    statement is its own transaction. The SQL is the same for any number of messages, so it
    is compiled and prepared once."""
    from sqlalchemy.dialects.postgresql import ARRAY

    sessions, messages = table_of(SessionRow), table_of(MessageRow)
    base: Any = _upsert_session("postgresql")  # an Insert (typed as what execute takes)
    upsert = (
        base.values({c.name: bindparam(c.name) for c in sessions.c if c.name != "summary"})
        .returning(sessions.c.key)
        .cte("s")
    )
    columns = tuple(_ARRAYS)
    arrays = [bindparam(name, type_=ARRAY(Text())) for name in _ARRAYS.values()]
    rows = (
        func.unnest(*arrays).table_valued(*columns, with_ordinality="ord").render_derived(name="m")
    )
    source = (
        select(
            upsert.c.key,
            bindparam("run_id", type_=String()),
            rows.c.role,
            rows.c.content,
            cast(rows.c.tool_calls, JSON()),
            rows.c.tool_call_id,
            rows.c.name,
            bindparam("now", type_=messages.c.created_at.type),
        )
        .select_from(upsert)
        .join(rows, true())
        .order_by(rows.c.ord)
    )
    return insert(messages).from_select(["session_key", "run_id", *columns, "created_at"], source)


_ARRAYS = {
    "role": "roles",
    "content": "contents",
    "tool_calls": "calls",
    "tool_call_id": "call_ids",
    "name": "names",
}
"""The messages' columns in :func:`_append_run_pg`, each one ``text[]`` parameter: ``text``
into ``varchar`` is an implicit cast, and asyncpg knows ``text[]`` where ``varchar[]`` would
cost each pooled connection a type introspection (a round trip, and ~0.3 MiB at the peak over
a pool of 15)."""


def _message_arrays(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Message rows (:func:`_to_row`) as one list per column (:data:`_ARRAYS`)."""
    arrays: dict[str, list[Any]] = {
        name: [row[column] for row in rows] for column, name in _ARRAYS.items()
    }
    arrays["calls"] = [None if calls is None else dump_json(calls) for calls in arrays["calls"]]
    return arrays


def _to_row(session_key: str, run_id: str, message: Message, now: datetime) -> dict[str, Any]:
    calls = [
        {"id": clean(c.id), "name": clean(c.name), "arguments": clean(c.arguments)}
        for c in message.tool_calls
    ]
    return {
        "session_key": session_key,
        "run_id": run_id,
        "role": message.role,
        "content": clean(message.content),
        "tool_calls": calls or None,
        "tool_call_id": clean_optional(message.tool_call_id),
        "name": clean_optional(message.name),
        "created_at": now,
    }


def _history(rows: Iterable[Row[Any]]) -> SessionHistory:
    """:data:`_HISTORY_PG`'s rows as a history: the summary from the session's row, if any."""
    summary, messages = None, []
    for row in rows:
        if row.part == 0:
            summary = row.content
        else:
            messages.append(_to_message(row))
    return SessionHistory(messages=messages, summary=summary)


def _to_message(row: _HistoryRow) -> Message:
    calls = tuple(
        ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in row.tool_calls or ()
    )
    return Message(
        role=row.role,  # the CHECK constraint guarantees a Role
        content=row.content,
        tool_calls=calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
    )


def _to_info(row: Row[Any]) -> SessionInfo:
    return SessionInfo(
        key=row.key,
        agent_id=row.agent_id,
        user_id=row.user_id,
        channel=row.channel,
        created_at=row.created_at,
        updated_at=row.updated_at,
        model=row.model,
        provider=row.provider,
        usage=Usage(row.input_tokens, row.output_tokens),
        compaction_count=row.compaction_count,
        summary=row.summary,
    )
