"""agent_core/store.py: the in-memory session store (tests, benchmarks, in-memory mode). The
SQL store is tested in tests/bot/storage/test_sessions.py."""

from __future__ import annotations

import pytest

from agent_core.messages import Message, ToolCall, Usage
from agent_core.store import MemoryStore
from agent_core.tracing import new_trace

CALL = ToolCall("c1", "read_file", "{}")


async def append(store: MemoryStore, key: str, *messages: Message, tokens: int = 1) -> None:
    await store.append_run(
        key, list(messages), run_id="r", usage=Usage(tokens, tokens), model="m", provider="p"
    )


async def test_an_unknown_session_has_an_empty_history() -> None:
    history = await MemoryStore().load_history("nobody")
    assert history.messages == [] and history.summary is None


async def test_runs_append_in_order_and_add_up_their_usage() -> None:
    store = MemoryStore()
    await append(store, "s", Message.user("one"), Message.assistant("1"), tokens=3)
    await append(store, "s", Message.user("two"), Message.assistant("2"), tokens=4)
    await append(store, "other", Message.user("elsewhere"))
    history = await store.load_history("s")
    assert [m.content for m in history.messages] == ["one", "1", "two", "2"]
    assert store.usage["s"] == Usage(7, 7)


async def test_a_loaded_history_is_a_copy() -> None:
    store = MemoryStore()
    await append(store, "s", Message.user("one"))
    history = await store.load_history("s")
    history.messages.append(Message.user("not stored"))
    assert [m.content for m in (await store.load_history("s")).messages] == ["one"]


async def test_set_summary_keeps_the_tail_and_counts_compactions() -> None:
    store = MemoryStore()
    await append(store, "s", *(Message.user(str(i)) for i in range(6)))
    assert await store.set_summary("s", "first summary", keep_last=2) == 4
    history = await store.load_history("s")
    assert [m.content for m in history.messages] == ["4", "5"]
    assert history.summary == "first summary"
    assert await store.set_summary("s", "second", keep_last=0) == 2
    assert (await store.load_history("s")).messages == []
    assert store.compactions["s"] == 2


async def test_a_kept_tail_never_starts_with_tool_results() -> None:
    store = MemoryStore()
    await append(
        store,
        "s",
        Message.user("read it"),
        Message.assistant(tool_calls=(CALL,)),
        Message.tool(CALL, "contents"),
        Message.assistant("done"),
    )
    # The last two would start with an orphaned tool result: it goes with the summary.
    assert await store.set_summary("s", "sum", keep_last=2) == 3
    assert [m.role for m in (await store.load_history("s")).messages] == ["assistant"]


async def test_keeping_more_than_there_is_keeps_everything() -> None:
    store = MemoryStore()
    await append(store, "s", Message.user("a"), Message.assistant("b"))
    assert await store.set_summary("s", "sum", keep_last=10) == 0
    assert [m.content for m in (await store.load_history("s")).messages] == ["a", "b"]


async def test_a_negative_keep_last_is_refused_and_changes_nothing() -> None:
    store = MemoryStore()
    await append(store, "s", Message.user("a"))
    with pytest.raises(ValueError, match="keep_last"):
        await store.set_summary("s", "sum", keep_last=-1)
    history = await store.load_history("s")
    assert [m.content for m in history.messages] == ["a"] and history.summary is None
    assert "s" not in store.compactions


async def test_traces_are_kept_in_order() -> None:
    store = MemoryStore()
    first, second = new_trace("r1", "s", "main"), new_trace("r2", "s", "main")
    await store.save_trace(first)
    await store.save_trace(second)
    assert [t.run_id for t in store.traces] == ["r1", "r2"]
