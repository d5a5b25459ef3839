"""ContextBudget: fitting a request into the window, and starting post-run compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.bootstrap import Workspaces
from agent_core.compaction import SUMMARY_PREFIX
from agent_core.context_budget import ContextBudget
from agent_core.messages import Message
from agent_core.run import RunRequest
from agent_core.settings import (
    AgentSettings,
    CompactionSettings,
    MemoryFlushSettings,
    PruningSettings,
)
from agent_core.store import MemoryStore
from agent_core.testing import ScriptedProvider, call, reply

BIG = "lorem ipsum dolor sit amet " * 40  # well over 100 tokens however it is counted


def make_budget(
    tmp_path: Path,
    provider: ScriptedProvider,
    *,
    compaction: CompactionSettings | None = None,
    **settings: object,
) -> tuple[ContextBudget, MemoryStore]:
    agent = AgentSettings(
        id="main",
        model="m",
        workspace=tmp_path / "ws",
        pruning=PruningSettings(mode="off"),
        compaction=compaction or CompactionSettings(),
        **settings,  # type: ignore[arg-type]
    )
    store = MemoryStore()
    workspaces = Workspaces(tmp_path / "ws", "main")
    return ContextBudget(agent, provider, store, workspaces, traces=store), store


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = [Message.system("you are helpful")]
    for i in range(turns):
        messages += [Message.user(f"q{i} {BIG}"), Message.assistant(f"a{i} {BIG}")]
    return messages


def run_request() -> RunRequest:
    return RunRequest(session_key="s1", message="hi", user_id="u1", run_id="r1")


class TestLimit:
    def test_window_minus_answer_tokens(self, tmp_path: Path) -> None:
        budget, _ = make_budget(tmp_path, ScriptedProvider(), context_window=1000, max_tokens=300)
        assert budget.limit == 700

    def test_never_below_one(self, tmp_path: Path) -> None:
        budget, _ = make_budget(tmp_path, ScriptedProvider(), context_window=100, max_tokens=500)
        assert budget.limit == 1


class TestCounters:
    def test_one_counter_per_model(self, tmp_path: Path) -> None:
        budget, _ = make_budget(tmp_path, ScriptedProvider())
        default = budget.deferred_counter()
        assert budget.deferred_counter("m") is default
        assert budget.deferred_counter("other") is not default
        assert budget.deferred_counter("other").model == "other"

    async def test_counter_is_loaded(self, tmp_path: Path) -> None:
        budget, _ = make_budget(tmp_path, ScriptedProvider())
        counter = await budget.counter()
        assert counter.loaded
        assert counter is budget.deferred_counter()
        assert counter.count([Message.user("hello")]) > 0


class TestFit:
    async def test_small_request_passes_uncounted(self, tmp_path: Path) -> None:
        budget, _ = make_budget(tmp_path, ScriptedProvider())
        messages = [Message.system("s"), Message.user("hello")]
        result = await budget.fit(messages, allow_compaction=True)
        assert result.messages == messages and result.messages is not messages
        assert result.tokens is None
        assert not (result.compacted or result.exceeded)

    async def test_a_loaded_encoding_still_lets_the_ceiling_decide(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A usage limit loads the encoding; a request far below every threshold must still
        pass on the ceiling alone, not be counted message by message on every call."""
        budget, _ = make_budget(tmp_path, ScriptedProvider())
        counter = await budget.counter()
        assert counter.loaded

        def counted(text: str) -> int:
            raise AssertionError(f"counted exactly: {text[:40]!r}")

        monkeypatch.setattr(counter, "count_text", counted)
        messages = conversation(2)
        result = await budget.fit(messages, allow_compaction=True)
        assert result.messages == messages and result.tokens is None
        assert not await budget._should_compact(messages, "an earlier summary")

    async def test_over_budget_without_compaction_is_exceeded(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("unused"))
        budget, _ = make_budget(tmp_path, provider, context_window=1000)
        messages = conversation(6)
        result = await budget.fit(messages, allow_compaction=False)
        assert result.exceeded
        assert not result.compacted
        assert result.tokens is not None and result.tokens > budget.limit
        assert result.messages == messages
        assert provider.requests == []

    async def test_compacts_mid_loop_at_the_trigger(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("they talked about lorem ipsum"))
        # ~2500 tokens: over the trigger (75%), under the limit.
        budget, _ = make_budget(tmp_path, provider, context_window=3000)
        messages = conversation(6)
        result = await budget.fit(messages, allow_compaction=True)
        assert result.compacted and result.compaction_error is None
        assert len(provider.requests) == 1
        assert result.messages[0] == messages[0]  # the system prompt is kept
        assert result.messages[1].content == SUMMARY_PREFIX + "they talked about lorem ipsum"
        assert len(result.messages) < len(messages)
        assert result.messages[-1] == messages[-1]  # the latest turn is kept
        assert result.tokens == (await budget.counter()).count(result.messages)
        assert not result.exceeded

    async def test_compaction_disabled_does_not_call_the_model(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("unused"))
        budget, _ = make_budget(
            tmp_path,
            provider,
            context_window=3000,
            compaction=CompactionSettings(enabled=False),
        )
        result = await budget.fit(conversation(6), allow_compaction=True)
        assert not result.compacted and provider.requests == []

    async def test_no_clean_split_is_reported_not_raised(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("unused"))
        budget, _ = make_budget(tmp_path, provider, context_window=1000)
        messages: list[Message] = [Message.user("do it")]
        for _ in range(5):
            c = call("read_file", {"path": "x"})
            messages += [Message.assistant("", (c,)), Message.tool(c, BIG)]
        result = await budget.fit(messages, allow_compaction=True)
        assert not result.compacted
        assert result.compaction_error == "no clean split point"
        assert result.exceeded
        assert provider.requests == []


class TestAfterRun:
    async def test_small_session_is_not_compacted(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("unused"))
        budget, store = make_budget(tmp_path, provider)
        stored = [Message.user("hi"), Message.assistant("hello")]
        store.sessions["s1"] = list(stored)
        assert not await budget.after_run(run_request(), stored, None)
        assert not budget.compactor.pending
        assert provider.requests == [] and store.traces == []

    async def test_many_messages_compact_in_the_background(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("a short summary"))
        settings = CompactionSettings(
            min_messages=4, keep_last=2, memory_flush=MemoryFlushSettings(enabled=False)
        )
        budget, store = make_budget(tmp_path, provider, compaction=settings)
        stored = conversation(3)[1:]  # 6 messages, no system prompt
        store.sessions["s1"] = list(stored)
        assert await budget.after_run(run_request(), stored, None)
        await budget.compactor.wait_idle()
        assert store.summaries["s1"] == "a short summary"
        assert store.sessions["s1"] == stored[-2:]
        assert len(provider.requests) == 1
        [trace] = store.traces
        assert trace.status == "completed"
        assert trace.root.attributes["kind"] == "post_run_compaction"
        assert trace.root.attributes["run_id"] == "r1"

    async def test_memory_flush_runs_before_the_summary(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("NO_REPLY"), reply("the summary"))
        settings = CompactionSettings(min_messages=4, keep_last=2)
        budget, store = make_budget(tmp_path, provider, compaction=settings)
        stored = conversation(3)[1:]
        store.sessions["s1"] = list(stored)
        assert await budget.after_run(run_request(), stored, None)
        await budget.compactor.wait_idle()
        assert len(provider.requests) == 2
        flush_request = provider.requests[0]
        assert flush_request.messages[-1].content == settings.memory_flush.prompt
        assert {t.name for t in flush_request.tools} == {"read_file", "write_file"}
        assert store.summaries["s1"] == "the summary"
        [trace] = store.traces
        names = [s.name for s in trace.spans]
        assert "memory_flush" in names and "post_run_compaction" in names
        assert trace.input_tokens >= 10  # the flush turn's usage is counted

    async def test_nothing_to_summarize_finishes_the_trace(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("unused"))
        settings = CompactionSettings(
            min_messages=0, keep_last=10, memory_flush=MemoryFlushSettings(enabled=False)
        )
        budget, store = make_budget(tmp_path, provider, compaction=settings)
        stored = [Message.user("hi"), Message.assistant("hello")]
        store.sessions["s1"] = list(stored)
        assert await budget.after_run(run_request(), stored, None)
        await budget.compactor.wait_idle()
        [trace] = store.traces
        assert trace.status == "not_compacted"
        assert "s1" not in store.summaries and provider.requests == []
