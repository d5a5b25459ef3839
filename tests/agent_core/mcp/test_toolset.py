"""A server's listing as the agent's tools: filtered, namespaced, bound to the server."""

from __future__ import annotations

from typing import Any

from mcp.types import Tool, ToolAnnotations

from agent_core.mcp._servers import ServerSpec
from agent_core.mcp._toolset import ToolSet, build_tools, offered
from agent_core.tools.base import ToolContext, ToolKind


def mcp_tool(name: str, **fields: object) -> Tool:
    return Tool.model_validate({"name": name, "inputSchema": {"type": "object"}, **fields})


async def _unused(tool: str, original: str, arguments: dict[str, Any]) -> str:
    raise AssertionError("not called")


def test_toolset_filters_and_binds_calls_to_the_original_name() -> None:
    calls: list[tuple[str, str]] = []

    async def call(tool: str, original: str, arguments: dict[str, object]) -> str:
        calls.append((tool, original))
        return "ok"

    listing = [mcp_tool("a.x"), mcp_tool("b"), mcp_tool("c")]
    spec = ServerSpec("srv", command="x", tools=("a.x", "b"), exclude_tools=("b",))
    toolset = build_tools(spec, listing, call)
    assert [t.name for t in toolset.tools] == ["srv__a_x"]
    assert toolset.tools[0].source == "mcp:srv"
    same = build_tools(spec, listing, call)
    assert same.signature == toolset.signature
    changed = build_tools(spec, [mcp_tool("a.x", description="new")], call)
    assert changed.signature != toolset.signature


def test_offered_applies_the_allow_list_then_the_exclusions() -> None:
    every = ServerSpec("s", command="x")
    assert offered(every, "anything")
    allow = ServerSpec("s", command="x", tools=("a", "b"))
    assert offered(allow, "a") and not offered(allow, "c")
    both = ServerSpec("s", command="x", tools=("a", "b"), exclude_tools=("b",))
    assert offered(both, "a") and not offered(both, "b")
    empty = ServerSpec("s", command="x", tools=())
    assert not offered(empty, "a")  # an empty allow-list lets nothing through


async def test_a_handler_calls_with_its_namespaced_and_original_name_and_the_arguments(
    tmp_path: Any,
) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call(tool: str, original: str, arguments: dict[str, Any]) -> str:
        calls.append((tool, original, arguments))
        return f"result of {original}"

    spec = ServerSpec("srv", command="x")
    toolset = build_tools(spec, [mcp_tool("read.file"), mcp_tool("echo")], call)
    ctx = ToolContext(tmp_path, session_key="s", user_id="u", agent_id="a", run_id="r")
    by_name = {tool.name: tool for tool in toolset.tools}
    assert await by_name["srv__echo"].handler({"text": "hi"}, ctx) == "result of echo"
    assert await by_name["srv__read_file"].handler({}, ctx) == "result of read.file"
    assert calls == [("srv__echo", "echo", {"text": "hi"}), ("srv__read_file", "read.file", {})]


def test_tools_carry_the_converted_definition() -> None:
    listing = [
        mcp_tool(
            "look",
            description="Look it up.",
            inputSchema={"type": "object", "properties": {"q": {"type": "string"}}},
            annotations=ToolAnnotations(readOnlyHint=True),
        ),
        mcp_tool("write"),
    ]
    look, write = build_tools(ServerSpec("s", command="x"), listing, _unused).tools
    assert (look.name, look.description, look.read_only, look.kind) == (
        "s__look",
        "Look it up.",
        True,
        ToolKind.SYNC,
    )
    assert look.parameters == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert (write.read_only, write.description) == (False, "MCP tool write of s")


def test_a_name_listed_twice_gives_one_tool_the_first_definition() -> None:
    listing: list[Tool] = [mcp_tool("t", description="first"), mcp_tool("t", description="second")]
    toolset = build_tools(ServerSpec("s", command="x"), listing, _unused)
    assert [(t.name, t.description) for t in toolset.tools] == [("s__t", "first")]
    assert len(toolset.signature) == 1


def test_the_signature_changes_with_what_the_model_sees_and_only_with_that() -> None:
    spec = ServerSpec("s", command="x")
    base = build_tools(spec, [mcp_tool("t")], _unused)
    # Another handler (a restarted connection) is no change.
    assert build_tools(spec, [mcp_tool("t")], _unused).signature == base.signature
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    read_only = ToolAnnotations(readOnlyHint=True)
    for changed in (
        [mcp_tool("t"), mcp_tool("u")],
        [mcp_tool("t", inputSchema=schema)],
        [mcp_tool("t", annotations=read_only)],
        [],
    ):
        assert build_tools(spec, changed, _unused).signature != base.signature


def test_nothing_listed_is_an_empty_toolset() -> None:
    assert build_tools(ServerSpec("s", command="x"), [], _unused) == ToolSet()
