"""Executing one assistant turn's tool calls.

The policy (agent-loop spec, tool execution):

- a single call runs inline;
- a batch whose calls are all known, read-only, synchronous tools, and that fits in the run's
  remaining tool-call budget, runs through a bounded pool; results keep the assistant's order;
- a batch made only of orchestration calls (spawn, delegate, team_tasks) runs concurrently too,
  bounded by ``max_parallel_children``: each starts its own child run;
- any other batch (a mutating, async, ``exec``/shell, ``wait`` or unknown tool, or one that
  would overrun the budget) runs one call at a time, because a later call may depend on what an
  earlier one changed;
- ``PreToolUse`` hooks run before any tool I/O of the batch starts; a blocked call is not
  executed and gets a synthetic error result;
- calls beyond the budget are not executed either: the model gets an error result telling it to
  answer with what it has.

Every failure (unknown tool, invalid JSON arguments, a crashing tool) becomes an error result
the model can read and recover from; nothing here raises except cancellation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog

from agent_core.errors import ToolError
from agent_core.hooks import PreToolUseHook, blocked_message, check_pre_tool_use
from agent_core.messages import ToolCall
from agent_core.settings import MAX_PARALLEL_CHILDREN, MAX_PARALLEL_TOOLS, MAX_TOOL_CALLS
from agent_core.tools.base import ToolContext, ToolKind, ToolRegistry

log = structlog.get_logger(__name__)

MAX_RESULT_CHARS = 50_000

# Names that are never parallel whatever their definition says (spec: exec/bash, wait).
SEQUENTIAL_NAMES = frozenset({"exec", "bash", "shell", "wait", "sleep", "spawn", "cron"})


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call: ToolCall
    content: str
    is_error: bool = False
    blocked: bool = False  # by a PreToolUse hook or the budget: never executed
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    duration_ms: float = 0.0


@dataclass(slots=True)
class ToolBudget:
    """Tool calls left in this run."""

    limit: int = MAX_TOOL_CALLS
    used: int = 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def take(self) -> bool:
        if self.remaining <= 0:
            return False
        self.used += 1
        return True


BeforeCall = Callable[[ToolCall], Awaitable[None]]
AfterCall = Callable[[ToolOutcome], Awaitable[None]]


async def run_tool(call: ToolCall, registry: ToolRegistry, ctx: ToolContext) -> ToolOutcome:
    """Run one call; every failure becomes an error result the model can read and recover from."""
    started_at, t0 = datetime.now(UTC), time.perf_counter()
    content, is_error = await _invoke(call, registry, replace(ctx, call_id=call.id))
    if len(content) > MAX_RESULT_CHARS:
        content = content[:MAX_RESULT_CHARS] + f"\n[truncated: {len(content)} characters]"
    duration = (time.perf_counter() - t0) * 1000
    return ToolOutcome(call, content, is_error, started_at=started_at, duration_ms=duration)


async def _invoke(call: ToolCall, registry: ToolRegistry, ctx: ToolContext) -> tuple[str, bool]:
    tool = registry.get(call.name)
    if tool is None and call.name in registry.hidden:
        return f"Error: {call.name} is not available: {registry.hidden[call.name]}.", True
    if tool is None:
        known = ", ".join(sorted(registry.tools)) or "none"
        return f"Error: unknown tool {call.name!r}. Available: {known}.", True
    try:
        args = call.parsed_arguments()
    except ValueError as exc:
        return f"Error: invalid arguments for {call.name}: {exc}", True
    try:
        return await tool.handler(args, ctx), False
    except ToolError as exc:
        return f"Error: {exc}", True
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("tool.crashed", tool=call.name)
        return f"Error: {call.name} failed: {type(exc).__name__}: {exc}", True


def fan_out(calls: Sequence[ToolCall], registry: ToolRegistry, budget: ToolBudget) -> bool:
    """A batch of two or more orchestration calls (spawn, delegate, team_tasks): their child
    runs go in parallel, bounded by the children limit."""
    if len(calls) < 2 or len(calls) > budget.remaining:
        return False
    return all(
        (tool := registry.get(call.name)) is not None and tool.kind is ToolKind.ORCHESTRATE
        for call in calls
    )


def parallel_safe(calls: Sequence[ToolCall], registry: ToolRegistry, budget: ToolBudget) -> bool:
    """Whether this batch may run concurrently (see the module docstring)."""
    if len(calls) < 2 or len(calls) > budget.remaining:
        return False
    for call in calls:
        tool = registry.get(call.name)
        if (
            tool is None
            or not tool.read_only
            or tool.kind is not ToolKind.SYNC
            or call.name in SEQUENTIAL_NAMES
        ):
            return False
    return True


async def execute_tool_calls(
    calls: list[ToolCall],
    registry: ToolRegistry,
    ctx: ToolContext,
    *,
    before: BeforeCall,
    after: AfterCall,
    hooks: Sequence[PreToolUseHook] = (),
    budget: ToolBudget | None = None,
    max_parallel: int = MAX_PARALLEL_TOOLS,
    max_parallel_children: int = MAX_PARALLEL_CHILDREN,
) -> list[ToolOutcome]:
    """Run the calls by the policy above; ``before``/``after`` emit events and spans."""
    budget = budget if budget is not None else ToolBudget()

    async def refused(call: ToolCall) -> ToolOutcome | None:
        """The synthetic result of a call that must not run, or None when it may run."""
        block = await check_pre_tool_use(hooks, call, ctx)
        if block is not None:
            return ToolOutcome(call, blocked_message(call, block), is_error=True, blocked=True)
        if not budget.take():
            message = (
                f"Error: the tool-call budget of this run ({budget.limit} calls) is used up; "
                f"{call.name} was not executed. Answer with what you have."
            )
            return ToolOutcome(call, message, is_error=True, blocked=True)
        return None

    async def one(call: ToolCall, verdict: ToolOutcome | None) -> ToolOutcome:
        await before(call)
        outcome = verdict if verdict is not None else await run_tool(call, registry, ctx)
        await after(outcome)
        return outcome

    if fan_out(calls, registry, budget):
        width = max_parallel_children
    elif parallel_safe(calls, registry, budget):
        width = max_parallel
    else:
        # Hook and budget decisions happen just before each call, after the previous one ran.
        return [await one(call, await refused(call)) for call in calls]

    # Every hook decides before any raw I/O of the batch starts.
    verdicts = [await refused(call) for call in calls]
    gate = asyncio.Semaphore(width)

    async def bounded(call: ToolCall, verdict: ToolOutcome | None) -> ToolOutcome:
        async with gate:
            return await one(call, verdict)

    # gather keeps the input order, which is the assistant's order.
    return list(
        await asyncio.gather(*(bounded(c, v) for c, v in zip(calls, verdicts, strict=True)))
    )
