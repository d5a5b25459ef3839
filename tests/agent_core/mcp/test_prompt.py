"""agent_core/mcp/prompt.py: prompt sections 10 (MCP tools listed inline) and 11 (search mode)."""

from __future__ import annotations

from pathlib import Path

from agent_core import AgentSettings, RunRequest
from agent_core.mcp._search import MCP_TOOL_SEARCH, add_mcp_tools
from agent_core.mcp.prompt import is_mcp, mcp_tools
from agent_core.prompt import PromptContext
from agent_core.tools.base import Tool, ToolRegistry
from tests.agent_core.mcp.test_search import _noop, many, mcp_tool
from tests.agent_core.test_prompt import NOW


def prompt_ctx(tmp_path: Path, registry: ToolRegistry) -> PromptContext:
    settings = AgentSettings(id="main", model="m", workspace=tmp_path)
    request = RunRequest("agent:main:x", "hi", "u1", channel="telegram")
    return PromptContext(settings, request, registry, tmp_path, NOW)


class TestPromptSections:
    def test_inline_section_lists_real_descriptions_by_server(self, tmp_path: Path) -> None:
        registry = ToolRegistry()
        tools = [
            mcp_tool("github", "create_issue", "Open an issue\nin a repository."),
            mcp_tool("files", "read", "Read a file.", read_only=True),
        ]
        add_mcp_tools(registry, tools, inline_max=40)
        text = mcp_tools(prompt_ctx(tmp_path, registry))
        assert text is not None and text.startswith("## MCP tools\n")
        assert "### files\n- files__read: Read a file." in text
        assert "### github\n- github__create_issue: Open an issue in a repository." in text
        assert text.index("### files") < text.index("### github")

    def test_search_section_names_the_tool_and_servers(self, tmp_path: Path) -> None:
        registry = ToolRegistry()
        add_mcp_tools(registry, many(100), inline_max=40)
        text = mcp_tools(prompt_ctx(tmp_path, registry))
        assert text is not None and text.startswith("## MCP tools (search)")
        assert "100 tools" in text and "(bulk)" in text and MCP_TOOL_SEARCH in text
        assert "create_invoice" not in text

    def test_no_mcp_tools_no_section(self, tmp_path: Path) -> None:
        assert mcp_tools(prompt_ctx(tmp_path, ToolRegistry())) is None

    def test_long_descriptions_are_cut_in_the_prompt_only(self, tmp_path: Path) -> None:
        registry = ToolRegistry()
        long = "word " * 200
        add_mcp_tools(registry, [mcp_tool("docs", "search", long)], inline_max=40)
        text = mcp_tools(prompt_ctx(tmp_path, registry))
        assert text is not None
        line = text.splitlines()[-1]
        assert line == "- docs__search: " + " ".join(long.split())[:300]
        assert registry.tools["docs__search"].description == long  # the definition keeps it all

    def test_built_in_tools_are_not_mcp_tools(self, tmp_path: Path) -> None:
        builtin = Tool("read_file", "Read a file.", {"type": "object"}, _noop, source="builtin")
        registry = ToolRegistry.of([builtin, mcp_tool("gh", "pr", "Open a pull request.")])
        assert not is_mcp(builtin)
        text = mcp_tools(prompt_ctx(tmp_path, registry))
        assert text is not None and "read_file" not in text and "gh__pr" in text
        assert mcp_tools(prompt_ctx(tmp_path, ToolRegistry.of([builtin]))) is None

    def test_search_section_counts_every_server_once(self, tmp_path: Path) -> None:
        registry = ToolRegistry()
        tools = [*many(30), *(mcp_tool("alpha", f"t{i}", "Something.") for i in range(15))]
        add_mcp_tools(registry, tools, inline_max=40)
        text = mcp_tools(prompt_ctx(tmp_path, registry))
        assert text is not None and "45 tools of external MCP servers (alpha, bulk)" in text

    def test_deferred_tools_without_the_search_tool_are_not_announced(self, tmp_path: Path) -> None:
        # Search mode is only promised when the model can actually call the search tool.
        registry = ToolRegistry()
        add_mcp_tools(registry, many(50), inline_max=10)
        del registry.tools[MCP_TOOL_SEARCH]
        assert mcp_tools(prompt_ctx(tmp_path, registry)) is None
