"""The tool execution policy: inline, bounded parallel, sequential, hooks, budget, hidden tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_core import EventType, RunStatus, Tool, ToolRegistry
from agent_core.hooks import Block
from agent_core.messages import ToolCall
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tool_exec import ToolBudget, ToolOutcome, execute_tool_calls, run_tool
from agent_core.tools import ToolContext, ToolKind
from tests.agent_core.test_loop import make_loop, request


class Probe:
    """Tools that record how many of them run at once and in which order they started."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.log: list[str] = []

    def tool(self, name: str, *, read_only: bool = True, kind: ToolKind = ToolKind.SYNC) -> Tool:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.log.append(f"run:{name}:{args.get('n')}")
            for _ in range(5):  # kept: yield, concurrent siblings get to start meanwhile
                await asyncio.sleep(0)
            self.running -= 1
            return f"{name}={args.get('n')}"

        return Tool(name, name, {"type": "object"}, handler, read_only=read_only, kind=kind)


CTX = ToolContext(Path("."), "s", "u", "main", "r")


async def run(
    calls: list[ToolCall],
    registry: ToolRegistry,
    *,
    hooks: Any = (),
    budget: ToolBudget | None = None,
) -> tuple[list[ToolOutcome], list[str]]:
    seen: list[str] = []

    async def before(c: ToolCall) -> None:
        seen.append(f"call:{c.id}")

    async def after(o: ToolOutcome) -> None:
        seen.append(f"result:{o.call.id}")

    outcomes = await execute_tool_calls(
        calls, registry, CTX, before=before, after=after, hooks=hooks, budget=budget
    )
    return outcomes, seen


class TestPolicy:
    async def test_read_only_batch_is_parallel_and_keeps_order(self) -> None:
        p = Probe()
        registry = ToolRegistry.of([p.tool("ro")])
        calls = [call("ro", {"n": i}) for i in range(4)]
        outcomes, _ = await run(calls, registry)
        assert p.peak == 4
        assert [o.content for o in outcomes] == ["ro=0", "ro=1", "ro=2", "ro=3"]
        assert [o.call.id for o in outcomes] == [c.id for c in calls]

    async def test_pool_is_bounded(self) -> None:
        p = Probe()
        registry = ToolRegistry.of([p.tool("ro")])
        await execute_tool_calls(
            [call("ro", {"n": i}) for i in range(6)],
            registry,
            CTX,
            before=_noop,
            after=_noop,
            max_parallel=2,
        )
        assert p.peak == 2

    async def test_single_call_runs_inline(self) -> None:
        p = Probe()
        outcomes, seen = await run([call("ro", {"n": 1})], ToolRegistry.of([p.tool("ro")]))
        assert outcomes[0].content == "ro=1" and not outcomes[0].is_error
        assert seen == [f"call:{outcomes[0].call.id}", f"result:{outcomes[0].call.id}"]

    @pytest.mark.parametrize(
        "other",
        [
            {"name": "rw", "read_only": False},
            {"name": "spawn_job", "kind": ToolKind.ASYNC},
            {"name": "run_cmd", "kind": ToolKind.EXEC},
            {"name": "pause", "kind": ToolKind.WAIT},
            {"name": "exec"},  # read-only by declaration, but exec by name
            {"name": "wait"},
        ],
    )
    async def test_unsafe_batches_run_sequentially(self, other: dict[str, Any]) -> None:
        p = Probe()
        registry = ToolRegistry.of([p.tool("ro"), p.tool(**other)])
        calls = [call("ro", {"n": 1}), call(other["name"], {"n": 2}), call("ro", {"n": 3})]
        outcomes, _ = await run(calls, registry)
        assert p.peak == 1
        assert p.log == ["run:ro:1", f"run:{other['name']}:2", "run:ro:3"]
        assert not any(o.is_error for o in outcomes)

    async def test_unknown_tool_makes_the_batch_sequential_and_is_an_error(self) -> None:
        p = Probe()
        calls = [call("ro", {"n": 1}), call("nope"), call("ro", {"n": 2})]
        outcomes, _ = await run(calls, ToolRegistry.of([p.tool("ro")]))
        assert p.peak == 1
        assert outcomes[1].is_error and "unknown tool 'nope'" in outcomes[1].content
        assert [o.content for o in (outcomes[0], outcomes[2])] == ["ro=1", "ro=2"]

    async def test_invalid_json_is_an_error_result(self) -> None:
        p = Probe()
        outcomes, _ = await run([call("ro", "{oops")], ToolRegistry.of([p.tool("ro")]))
        assert outcomes[0].is_error and "not valid JSON" in outcomes[0].content
        assert p.log == []

    async def test_crashing_tool_is_an_error_result(self) -> None:
        async def boom(args: dict[str, Any], ctx: ToolContext) -> str:
            raise RuntimeError("disk on fire")

        registry = ToolRegistry.of([Tool("boom", "b", {}, boom)])
        outcomes, _ = await run([call("boom")], registry)
        assert outcomes[0].is_error and "disk on fire" in outcomes[0].content
        assert outcomes[0].duration_ms >= 0


class TestBudget:
    async def test_batch_over_the_remaining_budget_runs_sequentially(self) -> None:
        p = Probe()
        budget = ToolBudget(limit=3)
        calls = [call("ro", {"n": i}) for i in range(4)]
        outcomes, _ = await run(calls, ToolRegistry.of([p.tool("ro")]), budget=budget)
        assert p.peak == 1
        assert [o.is_error for o in outcomes] == [False, False, False, True]
        assert "budget" in outcomes[3].content and outcomes[3].blocked
        assert p.log == ["run:ro:0", "run:ro:1", "run:ro:2"]
        assert budget.remaining == 0

    async def test_budget_spans_iterations_of_a_run(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(
            tool_calls(call("list_files"), call("list_files")),
            tool_calls(call("list_files"), call("list_files")),
            reply("done"),
        )
        loop, store, _ = make_loop(tmp_path, provider, max_tool_calls=3)
        result = await loop.run(request())
        assert result.status is RunStatus.COMPLETED
        tool_msgs = [m.content for m in store.sessions["s1"] if m.role == "tool"]
        assert len(tool_msgs) == 4
        assert "budget" in tool_msgs[3] and all("budget" not in m for m in tool_msgs[:3])


class TestHooks:
    async def test_a_hook_blocks_one_call_with_a_synthetic_result(self) -> None:
        p = Probe()
        registry = ToolRegistry.of([p.tool("ro")])
        seen_by_hook: list[str] = []

        async def no_secrets(c: ToolCall, ctx: ToolContext) -> Block | None:
            seen_by_hook.append(c.id)
            return Block("secrets are off limits") if c.parsed_arguments()["n"] == 2 else None

        calls = [call("ro", {"n": i}) for i in (1, 2, 3)]
        outcomes, seen = await run(calls, registry, hooks=[no_secrets])
        assert seen_by_hook == [c.id for c in calls]
        assert p.log == ["run:ro:1", "run:ro:3"]  # the blocked call never ran
        assert outcomes[1].is_error and outcomes[1].blocked
        assert "blocked" in outcomes[1].content and "secrets are off limits" in outcomes[1].content
        assert f"result:{calls[1].id}" in seen  # the model and the events still hear of it

    async def test_hooks_finish_before_any_parallel_io(self) -> None:
        order: list[str] = []
        p = Probe()
        registry = ToolRegistry.of([p.tool("ro")])

        async def hook(c: ToolCall, ctx: ToolContext) -> Block | None:
            order.append("hook")
            await asyncio.sleep(0)  # kept: a hook that yields (a suspension point, no wait)
            return None

        await run([call("ro", {"n": i}) for i in range(3)], registry, hooks=[hook])
        order += p.log
        assert order[:3] == ["hook"] * 3 and len(p.log) == 3
        assert p.peak == 3

    async def test_a_failing_hook_blocks(self) -> None:
        p = Probe()

        async def broken(c: ToolCall, ctx: ToolContext) -> Block | None:
            raise ValueError("bad policy file")

        outcomes, _ = await run(
            [call("ro", {"n": 1})], ToolRegistry.of([p.tool("ro")]), hooks=[broken]
        )
        assert outcomes[0].blocked and p.log == []

    async def test_blocked_call_in_a_run_is_recoverable_and_traced(self, tmp_path: Path) -> None:
        provider = ScriptedProvider(
            tool_calls(call("write_file", {"path": "a.txt", "content": "x"})), reply("ok then")
        )

        async def read_only_mode(c: ToolCall, ctx: ToolContext) -> Block | None:
            return Block("read-only mode") if c.name == "write_file" else None

        loop, store, events = make_loop(tmp_path, provider)
        loop.hooks.append(read_only_mode)
        result = await loop.run(request())
        assert result.content == "ok then"
        assert not (tmp_path / "ws" / "u1" / "a.txt").exists()
        tool_msg = next(m for m in store.sessions["s1"] if m.role == "tool")
        assert "read-only mode" in tool_msg.content
        # The model saw the synthetic result on its next call.
        assert provider.requests[1].messages[-1].content == tool_msg.content
        results = [e.payload for e in events if e.type is EventType.TOOL_RESULT]
        assert results[0]["is_error"] is True
        span = next(s for s in store.traces[-1].spans if s.kind.value == "tool")
        assert span.error and span.attributes["blocked"] is True


async def _noop(*_: object) -> None:
    return None


async def test_a_call_to_a_hidden_tool_is_refused_with_the_reason(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.hide("delegate", "delegate needs an agent link")
    ctx = ToolContext(tmp_path, "s", "u", "a", "r")
    outcome = await run_tool(ToolCall("c1", "delegate", "{}"), registry, ctx)
    assert outcome.is_error
    assert outcome.content == "Error: delegate is not available: delegate needs an agent link."
    assert "delegate" not in [s.name for s in registry.specs()]
