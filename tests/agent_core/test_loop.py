"""The agent loop's own logic, with a scripted provider (no network)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from agent_core import (
    FILE_TOOLS,
    AgentSettings,
    Event,
    EventBus,
    EventType,
    Loop,
    MemoryStore,
    RunRequest,
    RunStatus,
    Tool,
    ToolRegistry,
)
from agent_core.errors import ProviderUnavailable, RateLimited
from agent_core.messages import SessionHistory
from agent_core.retry import RetryPolicy
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from tests.waiting import wait_until


def make_loop(
    tmp_path: Path,
    provider: ScriptedProvider,
    *,
    tools: ToolRegistry | None = None,
    **settings: object,
) -> tuple[Loop, MemoryStore, list[Event]]:
    store = MemoryStore()
    bus = EventBus()
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    bus.subscribe(record)
    loop = Loop(
        AgentSettings(id="main", model="m", workspace=tmp_path / "ws", **settings),  # type: ignore[arg-type]
        provider,
        tools if tools is not None else ToolRegistry.of(FILE_TOOLS),
        store,
        store,
        bus,
        retry=RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.01),
    )
    return loop, store, events


def request(text: str = "hello", **kw: object) -> RunRequest:
    return RunRequest(session_key="s1", message=text, user_id="u1", **kw)  # type: ignore[arg-type]


class TestFinalAnswer:
    async def test_text_reply_is_returned_and_stored(self, tmp_path: Path) -> None:
        loop, store, events = make_loop(tmp_path, ScriptedProvider(reply("hi there")))
        result = await loop.run(request("hello"))
        assert result.status is RunStatus.COMPLETED
        assert result.content == "hi there"
        assert [(m.role, m.content) for m in store.sessions["s1"]] == [
            ("user", "hello"),
            ("assistant", "hi there"),
        ]
        types = [e.type for e in events]
        assert types[0] is EventType.RUN_STARTED and types[-1] is EventType.RUN_COMPLETED
        assert EventType.CHUNK in types
        assert result.usage.input_tokens == 10 and store.usage["s1"].output_tokens == 5

    async def test_history_is_sent_on_the_next_run(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("one"), reply("two"))
        loop, _, _ = make_loop(tmp_path, provider)
        await loop.run(request("first"))
        await loop.run(request("second"))
        sent = [(m.role, m.content) for m in provider.requests[1].messages[1:]]
        assert sent == [("user", "first"), ("assistant", "one"), ("user", "second")]

    async def test_thinking_tags_are_not_delivered(self, tmp_path: Path) -> None:
        loop, _, _ = make_loop(tmp_path, ScriptedProvider(reply("<think>plan</think>Answer")))
        result = await loop.run(request())
        assert result.content == "Answer"

    async def test_no_reply_is_silent(self, tmp_path: Path) -> None:
        loop, _, _ = make_loop(tmp_path, ScriptedProvider(reply("NO_REPLY")))
        result = await loop.run(request())
        assert result.silent and result.status is RunStatus.COMPLETED

    async def test_long_input_is_truncated_and_the_model_told(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("ok"))
        loop, _, _ = make_loop(tmp_path, provider, max_message_chars=1000)
        await loop.run(request("x" * 5000))
        sent = provider.requests[0].messages[-1].content
        assert sent.startswith("x" * 1000) and "x" * 1001 not in sent
        assert "5000 characters" in sent


class TestTools:
    async def test_write_then_read_round_trip(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(
            tool_calls(call("write_file", {"path": "notes/a.txt", "content": "42"})),
            tool_calls(call("read_file", {"path": "notes/a.txt"})),
            reply("the file says 42"),
        )
        loop, store, events = make_loop(tmp_path, provider)
        result = await loop.run(request())
        assert result.content == "the file says 42"
        assert (tmp_path / "ws" / "u1" / "notes" / "a.txt").read_text() == "42"
        tool_msgs = [m for m in store.sessions["s1"] if m.role == "tool"]
        assert tool_msgs[1].content == "42"
        results = [e.payload for e in events if e.type is EventType.TOOL_RESULT]
        assert [r["name"] for r in results] == ["write_file", "read_file"]
        assert not any(r["is_error"] for r in results)

    @pytest.mark.parametrize(
        "path", ["../escape.txt", "/etc/passwd", "a/../../b", "x\x00y", "../u2/secret"]
    )
    async def test_workspace_escape_is_an_error_result(self, tmp_path: Path, path: str) -> None:
        (tmp_path / "escape.txt").write_text("s3cr3t-value")
        (tmp_path / "ws" / "u2").mkdir(parents=True)
        (tmp_path / "ws" / "u2" / "secret").write_text("s3cr3t-value")
        provider = ScriptedProvider(tool_calls(call("read_file", {"path": path})), reply("done"))
        loop, store, _ = make_loop(tmp_path, provider)
        await loop.run(request())
        tool_msg = next(m for m in store.sessions["s1"] if m.role == "tool")
        assert tool_msg.content.startswith("Error:")
        assert "s3cr3t-value" not in tool_msg.content

    async def test_symlink_out_of_workspace_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "outside.txt").write_text("secret")
        ws = tmp_path / "ws" / "u1"
        ws.mkdir(parents=True)
        (ws / "link").symlink_to(tmp_path / "outside.txt")
        provider = ScriptedProvider(tool_calls(call("read_file", {"path": "link"})), reply("x"))
        loop, store, _ = make_loop(tmp_path, provider)
        await loop.run(request())
        tool_msg = next(m for m in store.sessions["s1"] if m.role == "tool")
        assert "access denied" in tool_msg.content

    async def test_unknown_tool_and_bad_json_are_recoverable(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(
            tool_calls(call("no_such_tool", {}), call("read_file", "{not json")),
            reply("recovered"),
        )
        loop, store, _ = make_loop(tmp_path, provider)
        result = await loop.run(request())
        assert result.content == "recovered"
        contents = [m.content for m in store.sessions["s1"] if m.role == "tool"]
        assert "unknown tool 'no_such_tool'" in contents[0]
        assert "not valid JSON" in contents[1]

    async def test_read_only_batch_runs_concurrently_in_order(self, tmp_path: Path) -> None:
        running = 0
        peak = 0

        async def slow(args: dict[str, object], ctx: object) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.05 if args["n"] == 1 else 0.01)  # kept: tools that take time
            running -= 1
            return f"r{args['n']}"

        probe = Tool("probe", "p", {"type": "object"}, slow, read_only=True)
        provider = ScriptedProvider(
            tool_calls(call("probe", {"n": 1}), call("probe", {"n": 2}), call("probe", {"n": 3})),
            reply("ok"),
        )
        loop, store, _ = make_loop(tmp_path, provider, tools=ToolRegistry.of([probe]))
        await loop.run(request())
        assert peak > 1
        assert [m.content for m in store.sessions["s1"] if m.role == "tool"] == ["r1", "r2", "r3"]

    async def test_mutating_batch_runs_one_at_a_time(self, tmp_path: Path) -> None:
        running = 0
        peak = 0

        async def slow(args: dict[str, object], ctx: object) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)  # kept: a tool that takes time
            running -= 1
            return "ok"

        tools = ToolRegistry.of(
            [
                Tool("ro", "r", {"type": "object"}, slow, read_only=True),
                Tool("rw", "w", {"type": "object"}, slow, read_only=False),
            ]
        )
        provider = ScriptedProvider(tool_calls(call("ro"), call("rw"), call("ro")), reply("ok"))
        loop, _, _ = make_loop(tmp_path, provider, tools=tools)
        await loop.run(request())
        assert peak == 1


class TestEnding:
    async def test_max_iterations_gives_a_clear_message(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(*[tool_calls(call("list_files")) for _ in range(3)])
        loop, store, _ = make_loop(tmp_path, provider, max_iterations=3)
        result = await loop.run(request())
        assert result.status is RunStatus.MAX_ITERATIONS
        assert "stopped after 3 steps" in result.content
        assert store.traces[-1].root.attributes["stop_reason"].startswith("stopped after 3")
        provider.assert_complete()

    async def test_per_request_cap_overrides_the_agent(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(tool_calls(call("list_files")))
        loop, _, _ = make_loop(tmp_path, provider)
        result = await loop.run(request(max_iterations=1))
        assert result.status is RunStatus.MAX_ITERATIONS and result.iterations == 1

    async def test_provider_failure_is_a_failed_result(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(*[ProviderUnavailable("boom", status_code=502)] * 3)
        loop, store, events = make_loop(tmp_path, provider)
        result = await loop.run(request())
        assert result.status is RunStatus.FAILED and "boom" in (result.error or "")
        assert events[-1].type is EventType.RUN_FAILED
        assert "s1" not in store.sessions
        assert store.traces[-1].status == "error"

    async def test_rate_limit_is_retried_with_an_event(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(RateLimited("slow down", retry_after=0.01), reply("fine"))
        loop, _, events = make_loop(tmp_path, provider)
        result = await loop.run(request())
        assert result.content == "fine"
        retrying = [e.payload for e in events if e.type is EventType.RUN_RETRYING]
        assert retrying == [{"attempt": 2, "maxAttempts": 3, "error": "slow down"}]

    async def test_a_swallowed_stop_is_honoured_before_the_model_call(self, tmp_path: Path) -> None:
        """A /stop that an await on the way lost (3.11's ``wait_for`` returning a result that
        arrived with the cancellation, as redis-py's sends can) leaves the task "cancelling"
        without an exception: the run must stop before it calls the model."""

        class Swallowing(MemoryStore):
            async def load_history(self, session_key: str) -> SessionHistory:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()  # the /stop ...
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0)  # kept: ... delivered here, and lost
                return await super().load_history(session_key)

        provider = ScriptedProvider(reply("too late"))
        store = Swallowing()
        loop = Loop(
            AgentSettings(id="main", model="m", workspace=tmp_path / "ws"),
            provider,
            ToolRegistry.of(FILE_TOOLS),
            store,
            store,
            EventBus(),
        )
        with pytest.raises(asyncio.CancelledError):
            await asyncio.create_task(loop.run(request()))
        assert provider.requests == []
        assert "s1" not in store.sessions

    async def test_cancel_saves_a_cancelled_trace_and_no_history(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(reply("late"), delay=5)
        loop, store, _ = make_loop(tmp_path, provider)
        task = asyncio.create_task(loop.run(request()))
        await wait_until(lambda: provider.requests)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert store.traces[-1].status == "cancelled"
        assert "s1" not in store.sessions

    async def test_trace_has_llm_and_tool_spans(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(tool_calls(call("list_files")), reply("done"))
        loop, store, _ = make_loop(tmp_path, provider)
        await loop.run(request())
        trace = store.traces[-1]
        assert [s.kind.value for s in trace.spans] == ["agent", "llm", "tool", "llm"]
        assert trace.status == "completed" and trace.output_preview == "done"
        assert trace.spans[1].attributes["iteration"] == 1
        assert all(s.parent_id == trace.root.id for s in trace.spans[1:])
