"""The history pipeline (spec section 5): limitHistoryTurns, then sanitizeHistory.

Whatever is stored (a crash mid-run, a compaction cut, a pruned tail), what leaves this module is
a sequence every provider accepts: each assistant tool call is followed by exactly one result
for each of its ids, and no tool result stands without its call.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_core.messages import Message, ToolCall

MISSING_TOOL_RESULT = "[Tool result missing -- session was compacted]"


def limit_history_turns(messages: Sequence[Message], limit: int) -> list[Message]:
    """The last ``limit`` user turns with their assistant and tool messages (``<= 0``: all)."""
    if limit <= 0:
        return list(messages)
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            seen += 1
            if seen == limit:
                return list(messages[index:])
    return list(messages)


def sanitize_history(messages: Sequence[Message]) -> list[Message]:
    """Repair tool_use/tool_result pairing.

    1. tool messages before any assistant tool call are dropped (orphans);
    2. after an assistant message with tool calls, the tool messages that follow are kept only
       when they answer one of its ids (once each), in the calls' order;
    3. an id left without a result gets :data:`MISSING_TOOL_RESULT`.
    """
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            continue  # not directly after its assistant call: an orphan
        out.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        results: dict[str, Message] = {}
        expected = {call.id for call in message.tool_calls}
        while i < n and messages[i].role == "tool":
            result = messages[i]
            i += 1
            if result.tool_call_id in expected and result.tool_call_id not in results:
                results[result.tool_call_id] = result
        out.extend(results.get(call.id) or _missing(call) for call in message.tool_calls)
    return out


def _missing(call: ToolCall) -> Message:
    return Message.tool(call, MISSING_TOOL_RESULT)


def prepare_history(messages: Sequence[Message], limit: int) -> list[Message]:
    """The whole pipeline, as the loop runs it on stored history."""
    return sanitize_history(limit_history_turns(messages, limit))


def is_valid_sequence(messages: Sequence[Message]) -> bool:
    """True when every tool result answers a pending call and no call is left unanswered."""
    pending: list[str] = []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id not in pending:
                return False
            pending.remove(message.tool_call_id)
            continue
        if pending:
            return False
        if message.role == "assistant":
            pending = [call.id for call in message.tool_calls]
    return not pending
