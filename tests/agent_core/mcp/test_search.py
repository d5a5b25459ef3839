"""MCP search mode, on plain Tool objects (no server needed): ranking, deferral above
``mcp_inline_max``, discovery through ``mcp_tool_search``. The prompt sections are in
``test_prompt.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ToolError
from agent_core.mcp._search import MCP_TOOL_SEARCH, add_mcp_tools
from agent_core.tools.base import Tool, ToolContext, ToolRegistry
from agent_core.tools.ranking import Entry, rank, words


async def _noop(args: dict[str, Any], ctx: ToolContext) -> str:
    return "ok"


def mcp_tool(server: str, name: str, description: str, read_only: bool = False) -> Tool:
    return Tool(
        f"{server}__{name}",
        description,
        {"type": "object", "properties": {"x": {"type": "string"}}},
        _noop,
        read_only=read_only,
        source=f"mcp:{server}",
    )


def many(n: int) -> list[Tool]:
    tools = [mcp_tool("bulk", f"tool_{i:03d}", f"Generic helper number {i}.") for i in range(n)]
    tools[n // 2] = mcp_tool("bulk", "create_invoice", "Create an invoice for a customer.")
    tools[n - 1] = mcp_tool("bulk", "list_invoices", "List invoices of a customer.")
    return tools


def tool_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path, "s", "u", "main", "r1")


class TestRanking:
    def test_words_split_identifiers(self) -> None:
        assert words("github__createIssue-now") == ["github", "create", "issue", "now"]

    def test_name_matches_outrank_description_matches(self) -> None:
        entries = [
            Entry("a", "send_mail", "Deliver a message about an invoice."),
            Entry("b", "invoice_create", "Make a new document."),
            Entry("c", "weather", "Forecast for a city."),
        ]
        assert [h.item for h in rank("invoice", entries)] == ["b", "a"]

    def test_no_overlap_no_hit_and_exact_name_first(self) -> None:
        entries = [Entry(1, "alpha", "beta"), Entry(2, "beta", "alpha alpha alpha")]
        assert rank("gamma", entries) == []
        assert rank("", entries) == []
        assert rank("beta", entries)[0].item == 2


class TestDeferral:
    def test_up_to_the_inline_max_every_tool_is_listed(self) -> None:
        registry = ToolRegistry()
        add_mcp_tools(registry, many(40), inline_max=40)
        assert len(registry.specs()) == 40
        assert MCP_TOOL_SEARCH not in registry

    def test_above_it_only_the_search_tool_is_offered(self) -> None:
        registry = ToolRegistry()
        add_mcp_tools(registry, many(100), inline_max=40)
        assert [s.name for s in registry.specs()] == [MCP_TOOL_SEARCH]
        assert registry.get("bulk__create_invoice") is not None  # still callable
        offered = registry.specs(discovered={"bulk__create_invoice"})
        assert {s.name for s in offered} == {MCP_TOOL_SEARCH, "bulk__create_invoice"}

    async def test_search_returns_schemas_and_marks_the_tools_discovered(
        self, tmp_path: Path
    ) -> None:
        registry = ToolRegistry()
        add_mcp_tools(registry, many(100), inline_max=40)
        search = registry.get(MCP_TOOL_SEARCH)
        assert search is not None and search.read_only
        ctx = tool_ctx(tmp_path)
        out = await search.handler({"query": "invoice customer", "limit": 2}, ctx)
        found = json.loads(out[out.index("[") :])
        assert [f["name"] for f in found] == ["bulk__create_invoice", "bulk__list_invoices"]
        assert found[0]["parameters"]["properties"] == {"x": {"type": "string"}}
        assert ctx.discovered == {"bulk__create_invoice", "bulk__list_invoices"}

    async def test_search_errors_are_tool_errors(self, tmp_path: Path) -> None:
        registry = ToolRegistry()
        add_mcp_tools(registry, many(50), inline_max=10)
        search = registry.get(MCP_TOOL_SEARCH)
        assert search is not None
        with pytest.raises(ToolError, match="query"):
            await search.handler({}, tool_ctx(tmp_path))
        with pytest.raises(ToolError, match="limit"):
            await search.handler({"query": "x", "limit": 0}, tool_ctx(tmp_path))
        ctx = tool_ctx(tmp_path)
        assert "No MCP tool" in await search.handler({"query": "zebra"}, ctx)
        assert ctx.discovered == set()
