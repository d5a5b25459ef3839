"""bot/storage/_sessions.py: history round trips, usage, summaries and reset, on both backends."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from agent_core.messages import Message, ToolCall, Usage
from agent_core.store import SessionStore, TraceStore
from bot.storage import Database, SessionNotFound, SqlSessionStore, SqlTraceStore
from tests.bot.storage.storage_fixtures import USAGE, _append


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


async def test_a_runs_many_messages_keep_their_order(db: Database) -> None:
    # On Postgres they go in as arrays unnested in one statement (_append_run_pg).
    store = SqlSessionStore(db)
    messages = [Message.user(f"m{n}") if n % 2 else Message.assistant(f"m{n}") for n in range(200)]
    await _append(store, "s", *messages[:3])
    await _append(store, "s", *messages[3:])
    assert (await store.load_history("s")).messages == messages


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
    history = await store.load_history("s")  # a summary and no message: still read
    assert history.messages == [] and history.summary == "second"


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
