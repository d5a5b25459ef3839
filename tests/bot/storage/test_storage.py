"""bot.storage against SQLite (always) and Postgres (when LOOPGATE_TEST_POSTGRES_URL is set).

Each Postgres test runs in its own fresh schema, dropped afterwards, so tests stay isolated
and can share one database.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, select
from sqlalchemy.exc import IntegrityError

from agent_core.messages import Message, ToolCall, Usage
from agent_core.store import SessionStore, TraceStore
from agent_core.tracing import SpanKind, new_trace
from bot.storage import (
    Database,
    SessionNotFound,
    SqlChannelState,
    SqlDedupeStore,
    SqlSessionStore,
    SqlTraceStore,
    StorageError,
    head_revision,
    open_database,
)
from bot.storage.models import Base, TraceRow
from tests.storage_support import Backend

TABLES = {
    "sessions",
    "messages",
    "summaries",
    "traces",
    "spans",
    "channel_state",
    "processed_messages",
    "agents",
    "memory_files",
    "memory_chunks",
    "inbox",
    "agent_links",
    "teams",
    "team_tasks",
}
USAGE = Usage(input_tokens=10, output_tokens=5)


async def _append(store: SqlSessionStore, key: str, *messages: Message, **kw: Any) -> None:
    await store.append_run(
        key, list(messages), run_id="run-1", usage=USAGE, model="m1", provider="p1", **kw
    )


# --- opening and migrations -------------------------------------------------------------


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _file_exists(path: str) -> bool:
    return Path(path).is_file()


def _revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def test_new_database_is_migrated_to_head(backend: Backend) -> None:
    async with await backend.open() as db, db.engine.connect() as conn:
        assert TABLES | {"alembic_version"} <= await conn.run_sync(_tables)
        assert await conn.run_sync(_revision) == head_revision() == "0006"
    if backend.name == "sqlite":
        assert _file_exists(backend.url.split("///", 1)[1])  # its parent dir was created


async def test_reopen_is_idempotent_and_keeps_data(backend: Backend) -> None:
    async with await backend.open() as db:
        await _append(SqlSessionStore(db), "s", Message.user("kept"))
    async with await backend.open() as db:
        history = await SqlSessionStore(db).load_history("s")
        async with db.engine.connect() as conn:
            assert await conn.run_sync(_revision) == head_revision()
    assert [m.content for m in history.messages] == ["kept"]


def _portable_schema(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave out the memory index's full-text objects, which exist only in migration 0003
    and differ per dialect: SQLite's FTS5 virtual table ``memory_chunks_fts`` and its shadow
    tables (``memory_chunks_fts_data``, ``_idx``, ``_docsize``, ``_config``), Postgres'
    generated ``search_vector`` column and its GIN index. Everything else is compared."""
    if type_ == "table" and name and name.startswith("memory_chunks_fts"):
        return False
    if type_ == "column" and name == "search_vector" and reflected:
        return False
    return not (type_ == "index" and name == "ix_memory_chunks_search_vector")


async def test_models_match_migrations(db: Database) -> None:
    def diff(conn: Connection) -> list[Any]:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_object": _portable_schema}
        )
        return list(compare_metadata(context, Base.metadata))

    async with db.engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_sqlite_pragmas(tmp_path: Path) -> None:
    async with (
        await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db,
        db.engine.connect() as conn,
    ):
        assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
        assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
        assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() == 5000


async def test_in_memory_database_is_shared_across_sessions() -> None:
    async with await open_database("sqlite+aiosqlite:///:memory:") as db:
        store = SqlSessionStore(db)
        await _append(store, "s", Message.user("hi"))
        assert len((await store.load_history("s")).messages) == 1


@pytest.mark.parametrize("url", ["not a url", "mysql+aiomysql://u:secret@h/db", "sqlite:"])
async def test_bad_url_raises_storage_error(url: str) -> None:
    with pytest.raises(StorageError) as info:
        await open_database(url)
    assert "secret" not in str(info.value)


async def test_unreachable_postgres_raises_without_password() -> None:
    with pytest.raises(StorageError) as info:
        await open_database("postgresql+asyncpg://bob:hunter2@127.0.0.1:1/nope")
    message = str(info.value)
    assert "hunter2" not in message
    assert "bob:***@127.0.0.1:1/nope" in message


async def test_unwritable_sqlite_path_raises_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StorageError, match="cannot open database"):
        await open_database(f"sqlite+aiosqlite:///{tmp_path}/file/sub/x.db")


# --- sessions ---------------------------------------------------------------------------


async def test_sql_stores_satisfy_agent_core_protocols(db: Database) -> None:
    sessions: SessionStore = SqlSessionStore(db)
    traces: TraceStore = SqlTraceStore(db)
    assert sessions and traces


async def test_round_trip_with_tool_calls(db: Database) -> None:
    store = SqlSessionStore(db)
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "notes.md"}')
    bad = ToolCall(id="call_2", name="write_file", arguments="{not json")
    messages = [
        Message.user("Đọc giúp tôi 📄 notes.md"),
        Message.assistant("", tool_calls=(call, bad)),
        Message.tool(call, "# Notes\n…"),
        Message.tool(bad, "error: arguments are not valid JSON"),
        Message.assistant("Xong ✅"),
    ]
    await _append(store, "tg:1", *messages, agent_id="a", user_id="u", channel="telegram")
    history = await store.load_history("tg:1")
    assert history.messages == messages
    assert history.summary is None
    assert await store.load_history("other") == type(history)()


async def test_long_unicode_content(db: Database) -> None:
    store = SqlSessionStore(db)
    content = ("ünïcødé 漢字 🚀 " * 8000)[:100_000]
    await _append(store, "s", Message.user(content))
    assert (await store.load_history("s")).messages[0].content == content


async def test_nul_is_replaced_on_every_backend(db: Database) -> None:
    store = SqlSessionStore(db)
    call = ToolCall(id="c\x00", name="t", arguments='{"a": "\x00"}')
    await _append(store, "s", Message.assistant("a\x00b", tool_calls=(call,)))
    [stored] = (await store.load_history("s")).messages
    assert stored.content == "a\ufffdb"
    assert stored.tool_calls == (ToolCall(id="c\ufffd", name="t", arguments='{"a": "\ufffd"}'),)


async def test_append_run_is_all_or_nothing(db: Database) -> None:
    store = SqlSessionStore(db)
    invalid = Message(role="bogus", content="violates ck_messages_role")  # type: ignore[arg-type]
    with pytest.raises(IntegrityError):
        await _append(store, "new", Message.user("one"), invalid, Message.user("three"))
    assert await store.get_session("new") is None
    assert (await store.load_history("new")).messages == []

    await _append(store, "old", Message.user("first"))
    with pytest.raises(IntegrityError):
        await _append(store, "old", Message.user("second"), invalid)
    info = await store.get_session("old")
    assert info is not None and info.usage == USAGE  # the failed run's usage was not added
    assert [m.content for m in (await store.load_history("old")).messages] == ["first"]


async def test_usage_accumulates_and_session_metadata(db: Database) -> None:
    store = SqlSessionStore(db)
    await _append(store, "s", Message.user("1"), agent_id="agent", user_id="u1", channel="slack")
    await store.append_run(
        "s", [], run_id="r2", usage=Usage(1, 2), model="m2", provider="p2", agent_id="ignored"
    )
    info = await store.get_session("s")
    assert info is not None
    assert info.usage == Usage(11, 7)
    assert (info.model, info.provider) == ("m2", "p2")
    assert (info.agent_id, info.user_id, info.channel) == ("agent", "u1", "slack")
    assert info.created_at.tzinfo is not None and info.updated_at >= info.created_at


async def test_concurrent_runs_do_not_lose_usage(db: Database) -> None:
    store = SqlSessionStore(db)
    await _append(store, "s", Message.user("0"))  # create the row; the race is on the update
    await asyncio.gather(*(_append(store, "s", Message.user(str(i))) for i in range(1, 9)))
    info = await store.get_session("s")
    assert info is not None and info.usage == Usage(90, 45)
    assert len((await store.load_history("s")).messages) == 9


async def test_set_summary_keeps_last_messages(db: Database) -> None:
    store = SqlSessionStore(db)
    await _append(store, "s", *(Message.user(f"m{i}") for i in range(6)))
    assert await store.set_summary("s", "first summary", keep_last=2) == 4
    history = await store.load_history("s")
    assert history.summary == "first summary"
    assert [m.content for m in history.messages] == ["m4", "m5"]

    assert await store.set_summary("s", "second", keep_last=0) == 2
    info = await store.get_session("s")
    assert info is not None and info.compaction_count == 2 and info.summary == "second"
    assert (await store.load_history("s")).messages == []


async def test_set_summary_never_keeps_orphan_tool_results(db: Database) -> None:
    store = SqlSessionStore(db)
    call = ToolCall(id="c1", name="t", arguments="{}")
    await _append(
        store,
        "s",
        Message.user("q"),
        Message.assistant("", tool_calls=(call,)),
        Message.tool(call, "r"),
        Message.assistant("answer"),
    )
    # keep_last=2 would start at the tool result, whose assistant call is summarised away.
    assert await store.set_summary("s", "sum", keep_last=2) == 3
    assert [m.content for m in (await store.load_history("s")).messages] == ["answer"]


async def test_set_summary_errors(db: Database) -> None:
    store = SqlSessionStore(db)
    with pytest.raises(SessionNotFound):
        await store.set_summary("missing", "x", keep_last=1)
    with pytest.raises(ValueError):
        await store.set_summary("missing", "x", keep_last=-1)


async def test_reset_session(db: Database) -> None:
    store = SqlSessionStore(db)
    await _append(store, "s", Message.user("a"), Message.assistant("b"), Message.user("c"))
    await store.set_summary("s", "sum", keep_last=1)
    assert await store.reset_session("s") == 1
    history = await store.load_history("s")
    assert history.messages == [] and history.summary is None
    info = await store.get_session("s")
    assert info is not None and info.usage == USAGE  # usage totals survive a reset
    await _append(store, "s", Message.user("fresh"))
    assert [m.content for m in (await store.load_history("s")).messages] == ["fresh"]


# --- traces -----------------------------------------------------------------------------


async def test_trace_round_trip(db: Database) -> None:
    store = SqlTraceStore(db)
    trace = new_trace("run-1", "s", "agent")
    trace.root.attributes["input_preview"] = "hello \x00"
    llm = trace.start_span(SpanKind.LLM, "gpt", model="m", when=datetime.now(UTC))
    llm.end(input_tokens=3)
    tool = trace.start_span(SpanKind.TOOL, "read_file", path="x")
    tool.end(error=True)
    trace.input_tokens, trace.output_tokens = 3, 4
    trace.finish("completed", output="done")
    await store.save_trace(trace)
    await store.save_trace(trace)  # saving again replaces, not duplicates

    [loaded] = await store.recent_traces(session_key="s")
    assert (loaded.id, loaded.run_id, loaded.status, loaded.output_preview) == (
        trace.id,
        "run-1",
        "completed",
        "done",
    )
    assert (loaded.input_tokens, loaded.output_tokens) == (3, 4)
    assert loaded.started_at == trace.started_at and loaded.ended_at == trace.ended_at
    assert [s.id for s in loaded.spans] == [s.id for s in trace.spans]
    assert loaded.root.parent_id is None
    assert {s.parent_id for s in loaded.spans[1:]} == {trace.root.id}
    assert [s.kind for s in loaded.spans] == [SpanKind.AGENT, SpanKind.LLM, SpanKind.TOOL]
    assert loaded.spans[2].error and not loaded.spans[1].error
    assert loaded.spans[1].attributes["input_tokens"] == 3
    assert isinstance(loaded.spans[1].attributes["when"], str)  # non-JSON values as text
    async with db.sessionmaker() as s:
        preview = await s.scalar(select(TraceRow.input_preview).where(TraceRow.id == trace.id))
    assert preview == "hello \ufffd"


async def test_recent_traces_order_filter_and_limit(db: Database) -> None:
    store = SqlTraceStore(db)
    base = datetime.now(UTC)
    for i in range(5):
        trace = new_trace(f"run-{i}", "a" if i % 2 == 0 else "b", "agent")
        trace.started_at = base + timedelta(seconds=i)
        trace.finish("completed")
        await store.save_trace(trace)
    assert [t.run_id for t in await store.recent_traces(limit=3)] == ["run-4", "run-3", "run-2"]
    assert [t.run_id for t in await store.recent_traces(session_key="b")] == ["run-3", "run-1"]
    assert await store.recent_traces(session_key="none") == []


# --- channel state and dedupe -----------------------------------------------------------


async def test_channel_state_upsert(db: Database) -> None:
    state = SqlChannelState(db)
    assert await state.get("telegram", "offset") is None
    await state.set("telegram", "offset", "41")
    await state.set("telegram", "offset", "42")
    await state.set("slack", "offset", "x")
    assert await state.get("telegram", "offset") == "42"
    assert await state.get("slack", "offset") == "x"


async def test_dedupe_persists_across_reopen(backend: Backend) -> None:
    async with await backend.open() as db:
        dedupe = SqlDedupeStore(db)
        assert await dedupe.seen("telegram:1:100") is False
        assert await dedupe.seen("telegram:1:100") is True
        assert await dedupe.seen("telegram:1:101") is False
        long_key = "k" * 1000
        assert await dedupe.seen(long_key) is False
    async with await backend.open() as db:
        dedupe = SqlDedupeStore(db)
        assert await dedupe.seen("telegram:1:100") is True
        assert await dedupe.seen(long_key) is True


async def test_dedupe_concurrent_seen_admits_one(db: Database) -> None:
    dedupe = SqlDedupeStore(db)
    results = await asyncio.gather(*(dedupe.seen("same") for _ in range(8)))
    assert results.count(False) == 1


async def test_dedupe_prune(db: Database) -> None:
    await SqlDedupeStore(db).seen("old")
    assert await SqlDedupeStore(db).prune() == 0  # within the default TTL
    expired = SqlDedupeStore(db, ttl_seconds=0)
    assert await expired.prune() == 1
    assert await expired.seen("old") is False


async def test_concurrent_start_up_migrates_once(backend: Backend) -> None:
    databases = await asyncio.gather(*(backend.open() for _ in range(4)))
    for database in databases:
        await database.aclose()
    async with await backend.open() as db, db.engine.connect() as conn:
        assert await conn.run_sync(_revision) == head_revision()
