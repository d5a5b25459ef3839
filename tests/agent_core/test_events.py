"""Run events over the real OpenAI-compatible provider, and the one subscriber API."""

from __future__ import annotations

from pathlib import Path

from agent_core import (
    AgentSettings,
    Event,
    EventBus,
    EventType,
    MemoryStore,
    RunRequest,
    RunStatus,
)
from agent_core.loop import Loop
from agent_core.providers import OpenAICompatProvider
from agent_core.retry import RetryPolicy
from agent_core.tools import FILE_TOOLS, ToolRegistry
from tests.fakes.llm_server import FakeLLM, call, error, text, tool_calls


def make(llm: FakeLLM, tmp_path: Path, bus: EventBus) -> tuple[Loop, OpenAICompatProvider]:
    provider = OpenAICompatProvider(llm.base_url)
    store = MemoryStore()
    loop = Loop(
        AgentSettings(id="main", model="fake-model", workspace=tmp_path),
        provider,
        ToolRegistry.of(FILE_TOOLS),
        store,
        store,
        bus,
        retry=RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01),
    )
    return loop, provider


async def test_a_tool_run_emits_the_event_table(llm: FakeLLM, tmp_path: Path) -> None:
    bus = EventBus()
    events: list[Event] = []

    async def record(e: Event) -> None:
        events.append(e)

    bus.subscribe(record)
    loop, provider = make(llm, tmp_path, bus)
    llm.script(
        error(429, retry_after=0),
        tool_calls(call("list_files", {"path": "."}), content="Let me look."),
        text("All ", "done.", reasoning="the list is empty"),
    )
    try:
        result = await loop.run(RunRequest(session_key="s", message="what's there?", user_id="u"))
    finally:
        await provider.aclose()
    assert result.status is RunStatus.COMPLETED and result.content == "All done."
    by_type: dict[EventType, list[dict[str, object]]] = {}
    for e in events:
        by_type.setdefault(e.type, []).append(e.payload)
        assert e.run_id == result.run_id and e.session_key == "s"
    assert by_type[EventType.RUN_STARTED] == [{"message": "what's there?"}]
    assert by_type[EventType.ACTIVITY] == [
        {"phase": "thinking", "iteration": 1},
        {"phase": "tool_exec", "iteration": 1},
        {"phase": "thinking", "iteration": 2},
    ]
    assert by_type[EventType.RUN_RETRYING][0]["attempt"] == 2
    assert by_type[EventType.RUN_RETRYING][0]["maxAttempts"] == 2
    assert "429" in str(by_type[EventType.RUN_RETRYING][0]["error"])
    assert [p["content"] for p in by_type[EventType.CHUNK]][-2:] == ["All ", "done."]
    assert by_type[EventType.THINKING] == [{"content": "the list is empty"}]
    assert by_type[EventType.BLOCK_REPLY] == [{"content": "Let me look."}]
    [tool_call] = by_type[EventType.TOOL_CALL]
    assert tool_call["name"] == "list_files" and tool_call["arguments"] == {"path": "."}
    [tool_result] = by_type[EventType.TOOL_RESULT]
    assert tool_result["id"] == tool_call["id"] and tool_result["is_error"] is False
    assert isinstance(tool_result["result"], str)
    [completed] = by_type[EventType.RUN_COMPLETED]
    assert completed["content"] == "All done."
    assert set(completed["usage"]) >= {"input_tokens", "output_tokens"}  # type: ignore[arg-type]
    assert events[-1].type is EventType.RUN_COMPLETED
    assert EventType.RUN_FAILED not in by_type
    assert "the list is empty" not in result.content


async def test_unrecoverable_error_emits_run_failed(llm: FakeLLM, tmp_path: Path) -> None:
    bus = EventBus()
    events: list[Event] = []

    async def record(e: Event) -> None:
        events.append(e)

    bus.subscribe(record)
    loop, provider = make(llm, tmp_path, bus)
    llm.script(error(500, "kaput"), error(500, "kaput"))
    try:
        result = await loop.run(RunRequest(session_key="s", message="hi", user_id="u"))
    finally:
        await provider.aclose()
    assert result.status is RunStatus.FAILED
    assert events[-1].type is EventType.RUN_FAILED and "kaput" in events[-1].payload["error"]
    assert EventType.RUN_COMPLETED not in [e.type for e in events]


class TestBus:
    async def test_session_filter_unsubscribe_and_failing_subscriber(self) -> None:
        bus = EventBus()
        everything: list[str] = []
        only_a: list[str] = []

        async def all_(e: Event) -> None:
            everything.append(e.session_key)

        async def broken(e: Event) -> None:
            raise RuntimeError("subscriber bug")

        async def a(e: Event) -> None:
            only_a.append(e.session_key)

        bus.subscribe(broken)
        bus.subscribe(all_)
        stop_a = bus.subscribe(a, session_key="A")
        await bus.publish(Event(EventType.CHUNK, "r", "A", {"content": "x"}))
        await bus.publish(Event(EventType.CHUNK, "r", "B", {"content": "y"}))
        stop_a()
        await bus.publish(Event(EventType.CHUNK, "r", "A", {"content": "z"}))
        assert everything == ["A", "B", "A"] and only_a == ["A"]
        assert Event(EventType.RUN_FAILED, "r", "A", {"error": "e"}).as_dict() == {
            "type": "run.failed",
            "run_id": "r",
            "session_key": "A",
            "payload": {"error": "e"},
        }
