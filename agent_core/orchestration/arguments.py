"""Reading orchestration tool arguments: one clear ToolError per bad argument."""

from __future__ import annotations

from typing import Any

from agent_core.errors import ToolError

MAX_TASK_CHARS = 20_000  # a brief longer than this is a paste, not a task


def text(args: dict[str, Any], tool: str, name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ToolError(tool, f"argument {name!r} (non-empty string) is required")
    if len(value) > MAX_TASK_CHARS:
        raise ToolError(
            tool, f"argument {name!r} is {len(value)} characters (max {MAX_TASK_CHARS})"
        )
    return value.strip()


def flag(args: dict[str, Any], tool: str, name: str, default: bool) -> bool:
    value = args.get(name, default)
    if not isinstance(value, bool):
        raise ToolError(tool, f"argument {name!r} must be true or false")
    return value


def strings(args: dict[str, Any], tool: str, name: str) -> list[str]:
    value = args.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolError(tool, f"argument {name!r} must be a list of strings")
    return value


WAIT_SCHEMA = {
    "type": "boolean",
    "description": (
        "true (default): wait and get the result as this tool's result. false: run in the "
        "background; the result arrives later in this chat as a new message."
    ),
}
