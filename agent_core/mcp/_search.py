"""MCP search mode (prompt section 11): ``mcp_tool_search`` over tools too many to list.

When an agent has more MCP tools than ``mcp_inline_max``, they are registered as deferred tools
(callable, not offered). ``mcp_tool_search`` ranks them by name and description; the ones it
returns are offered to the model from the next iteration of the run on, with their real schemas,
so the model calls them like any other tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext, ToolRegistry
from agent_core.tools.ranking import Entry, rank

MCP_TOOL_SEARCH = "mcp_tool_search"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
_DESCRIPTION_CHARS = 500


def add_mcp_tools(registry: ToolRegistry, tools: Sequence[Tool], inline_max: int) -> None:
    """List up to ``inline_max`` MCP tools; above that, defer them all behind the search tool."""
    if len(tools) <= inline_max:
        for tool in tools:
            registry.register(tool)
        return
    for tool in tools:
        registry.defer(tool)
    registry.register(mcp_tool_search(tools))


def mcp_tool_search(tools: Sequence[Tool]) -> Tool:
    entries = [Entry(tool, tool.name, tool.description) for tool in tools]

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError(MCP_TOOL_SEARCH, "argument 'query' (keywords) is required")
        limit = args.get("limit", DEFAULT_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ToolError(MCP_TOOL_SEARCH, "argument 'limit' must be a positive integer")
        hits = rank(query, entries, limit=min(limit, MAX_LIMIT))
        if not hits:
            return f"No MCP tool matches {query!r}. Try other keywords."
        ctx.discovered.update(hit.item.name for hit in hits)
        found = [
            {
                "name": hit.item.name,
                "description": hit.item.description[:_DESCRIPTION_CHARS],
                "parameters": hit.item.parameters,
            }
            for hit in hits
        ]
        return f"{len(found)} tool(s) found; you can now call them by name:\n" + json.dumps(
            found, ensure_ascii=False, indent=1
        )

    return Tool(
        name=MCP_TOOL_SEARCH,
        description=(
            f"Search the {len(tools)} tools of this agent's MCP servers by keywords (what you "
            "want to do, a service or object name). Returns the best matches with their "
            "parameters; the tools returned become callable by their full name."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords, e.g. 'create issue'."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": f"How many tools to return (default {DEFAULT_LIMIT}).",
                },
            },
            "required": ["query"],
        },
        handler=handler,
        read_only=True,
    )
