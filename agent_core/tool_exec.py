"""Executing one assistant turn's tool calls.

A single call runs inline. A batch of read-only calls runs through a bounded pool and its results
keep the assistant's order. Any batch with a mutating or unknown tool runs one call at a time,
because a later call may depend on what an earlier one changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from agent_core.errors import ToolError
from agent_core.messages import ToolCall
from agent_core.tools.base import ToolContext, ToolRegistry

log = structlog.get_logger(__name__)

MAX_PARALLEL_TOOLS = 4
MAX_RESULT_CHARS = 50_000


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call: ToolCall
    content: str
    is_error: bool = False


BeforeCall = Callable[[ToolCall], Awaitable[None]]
AfterCall = Callable[[ToolOutcome, float], Awaitable[None]]


async def run_tool(call: ToolCall, registry: ToolRegistry, ctx: ToolContext) -> ToolOutcome:
    """Run one call; every failure becomes an error result the model can read and recover from."""
    tool = registry.get(call.name)
    if tool is None:
        known = ", ".join(sorted(registry.tools)) or "none"
        return ToolOutcome(call, f"Error: unknown tool {call.name!r}. Available: {known}.", True)
    try:
        args = call.parsed_arguments()
    except ValueError as exc:
        return ToolOutcome(call, f"Error: invalid arguments for {call.name}: {exc}", True)
    try:
        content = await tool.handler(args, ctx)
    except ToolError as exc:
        return ToolOutcome(call, f"Error: {exc}", True)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("tool.crashed", tool=call.name)
        return ToolOutcome(call, f"Error: {call.name} failed: {type(exc).__name__}: {exc}", True)
    if len(content) > MAX_RESULT_CHARS:
        content = content[:MAX_RESULT_CHARS] + f"\n[truncated: {len(content)} characters]"
    return ToolOutcome(call, content)


def _parallel_safe(calls: list[ToolCall], registry: ToolRegistry) -> bool:
    if len(calls) < 2:
        return False
    for call in calls:
        tool = registry.get(call.name)
        if tool is None or not tool.read_only:
            return False
    return True


async def execute_tool_calls(
    calls: list[ToolCall],
    registry: ToolRegistry,
    ctx: ToolContext,
    *,
    before: BeforeCall,
    after: AfterCall,
    max_parallel: int = MAX_PARALLEL_TOOLS,
) -> list[ToolOutcome]:
    """Run the calls by the policy above; ``before``/``after`` emit events and spans."""
    loop = asyncio.get_running_loop()

    async def one(call: ToolCall) -> ToolOutcome:
        await before(call)
        started = loop.time()
        outcome = await run_tool(call, registry, ctx)
        await after(outcome, (loop.time() - started) * 1000)
        return outcome

    if not _parallel_safe(calls, registry):
        return [await one(call) for call in calls]

    gate = asyncio.Semaphore(max_parallel)

    async def bounded(call: ToolCall) -> ToolOutcome:
        async with gate:
            return await one(call)

    # gather keeps the input order, which is the assistant's order.
    return list(await asyncio.gather(*(bounded(call) for call in calls)))
