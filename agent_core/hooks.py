"""``PreToolUse`` hooks: checks that run before a tool call and may block it.

A hook sees the call and its context and returns ``None`` (allow) or a :class:`Block` with a
reason. A blocked call is not executed; the model gets a synthetic error tool result saying why,
so it can change course instead of the run failing. Hooks run before any parallel tool I/O
starts, one after another, in the order they were added. A hook that raises blocks the call
(fail closed): a broken policy check must not silently allow what it was meant to stop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from agent_core.messages import ToolCall
from agent_core.tools.base import ToolContext

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Block:
    reason: str


PreToolUseHook = Callable[[ToolCall, ToolContext], Awaitable[Block | None]]


async def check_pre_tool_use(
    hooks: Sequence[PreToolUseHook], call: ToolCall, ctx: ToolContext
) -> Block | None:
    """The first block any hook returns, or ``None`` when every hook allows the call."""
    for hook in hooks:
        try:
            verdict = await hook(call, ctx)
        except Exception as exc:
            log.exception("hook.failed", tool=call.name, hook=getattr(hook, "__name__", "?"))
            return Block(f"a pre-tool-use check failed ({type(exc).__name__})")
        if verdict is not None:
            log.info("hook.blocked", tool=call.name, reason=verdict.reason)
            return verdict
    return None


def blocked_message(call: ToolCall, block: Block) -> str:
    return f"Error: the call to {call.name} was blocked and not executed: {block.reason}"
