"""A server's tool listing as the agent's ``Tool``s: filtered, namespaced, bound to the server."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.types import Tool as McpTool

import agent_core.mcp._convert as convert
from agent_core.mcp._naming import namespaced_names
from agent_core.mcp._servers import ServerSpec
from agent_core.tools.base import Tool, ToolContext, ToolHandler, ToolKind

# (namespaced name, original name, arguments) → the result text, or ToolError.
Caller = Callable[[str, str, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class ToolSet:
    tools: tuple[Tool, ...] = ()
    # What the model would see of them: a re-listing that changes none of it is no change.
    signature: tuple[tuple[str, str, str, bool], ...] = ()


def offered(spec: ServerSpec, name: str) -> bool:
    """Whether the config lets the server's tool ``name`` through."""
    if spec.tools is not None and name not in spec.tools:
        return False
    return name not in spec.exclude_tools


def _handler(call: Caller, tool: str, original: str) -> ToolHandler:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return await call(tool, original, arguments)

    return handler


def build_tools(spec: ServerSpec, listing: Sequence[McpTool], call: Caller) -> ToolSet:
    wanted = [tool for tool in listing if offered(spec, tool.name)]
    names = namespaced_names(spec.name, (tool.name for tool in wanted))
    tools: list[Tool] = []
    seen: set[str] = set()
    for mcp_tool in wanted:
        if mcp_tool.name in seen:  # a server listing one name twice: the first one wins
            continue
        seen.add(mcp_tool.name)
        name = names[mcp_tool.name]
        tools.append(
            Tool(
                name=name,
                description=convert.description(mcp_tool, spec.name),
                parameters=convert.parameters(mcp_tool),
                handler=_handler(call, name, mcp_tool.name),
                read_only=convert.read_only(mcp_tool),
                kind=ToolKind.SYNC,
                source=f"mcp:{spec.name}",
            )
        )
    signature = tuple(
        (t.name, t.description, json.dumps(t.parameters, sort_keys=True, default=str), t.read_only)
        for t in tools
    )
    return ToolSet(tuple(tools), signature)
