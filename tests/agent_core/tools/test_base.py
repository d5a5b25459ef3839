"""agent_core/tools/base.py: the tool registry: listed, hidden and deferred tools, and copies
an agent can extend without touching the shared one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core.providers.base import ToolSpec
from agent_core.settings import MAX_FILE_BYTES, WORKSPACE_MAX_BYTES
from agent_core.tools.base import Tool, ToolContext, ToolRegistry

PARAMS: dict[str, Any] = {"type": "object", "properties": {}}


def tool(name: str) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        return name

    return Tool(name, f"the {name} tool", PARAMS, handler)


def test_spec_is_what_the_model_is_offered() -> None:
    assert tool("read").spec == ToolSpec("read", "the read tool", PARAMS)


def test_of_register_get_and_contains() -> None:
    registry = ToolRegistry.of([tool("a"), tool("b")])
    registry.register(tool("c"))
    assert len(registry) == 3 and "c" in registry and "z" not in registry
    found = registry.get("b")
    assert found is not None and found.name == "b"
    assert registry.get("z") is None


def test_registering_a_name_again_replaces_the_tool() -> None:
    registry = ToolRegistry.of([tool("a")])
    replacement = Tool("a", "new", PARAMS, tool("a").handler)
    registry.register(replacement)
    assert len(registry) == 1 and registry.get("a") is replacement


def test_a_hidden_tool_is_neither_offered_nor_callable_and_keeps_its_reason() -> None:
    registry = ToolRegistry.of([tool("a"), tool("delegate")])
    registry.hide("delegate", "needs a link")
    registry.hide("never_registered", "not in this mode")  # hiding works before registering
    assert "delegate" not in registry and registry.get("delegate") is None
    assert [s.name for s in registry.specs()] == ["a"]
    assert registry.hidden == {"delegate": "needs a link", "never_registered": "not in this mode"}


def test_deferred_tools_are_callable_but_offered_only_once_discovered() -> None:
    registry = ToolRegistry.of([tool("a")])
    registry.defer(tool("mcp_x"))
    registry.defer(tool("mcp_y"))
    assert "mcp_x" not in registry and len(registry) == 1  # not listed up front
    assert registry.get("mcp_x") is not None  # yet a call to it finds it
    assert [s.name for s in registry.specs()] == ["a"]
    assert [s.name for s in registry.specs({"mcp_y", "unknown"})] == ["a", "mcp_y"]


def test_a_listed_tool_wins_over_a_deferred_one_of_the_same_name() -> None:
    registry = ToolRegistry.of([tool("x")])
    deferred = Tool("x", "deferred", PARAMS, tool("x").handler)
    registry.defer(deferred)
    found = registry.get("x")
    assert found is not None and found.description == "the x tool"


def test_a_clone_can_change_without_touching_the_original() -> None:
    shared = ToolRegistry.of([tool("a"), tool("b")])
    shared.defer(tool("d"))
    shared.hide("h", "why")
    mine = shared.clone()
    mine.register(tool("c"))
    mine.hide("a", "not for this agent")
    mine.defer(tool("e"))
    assert sorted(shared.tools) == ["a", "b"] and sorted(shared.deferred) == ["d"]
    assert shared.hidden == {"h": "why"}
    assert sorted(mine.tools) == ["b", "c"] and sorted(mine.deferred) == ["d", "e"]
    assert mine.hidden == {"h": "why", "a": "not for this agent"}


def test_context_defaults_to_the_settings_quotas_and_a_fresh_discovered_set(
    tmp_path: Path,
) -> None:
    a = ToolContext(tmp_path, "s", "u", "main", "r1")
    b = ToolContext(tmp_path, "s", "u", "main", "r2")
    assert (a.max_file_bytes, a.workspace_max_bytes) == (MAX_FILE_BYTES, WORKSPACE_MAX_BYTES)
    a.discovered.add("mcp_x")
    assert b.discovered == set()
