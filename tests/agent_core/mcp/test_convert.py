"""MCP client units without a server: names, definitions, results as text, specs, redaction."""

from __future__ import annotations

import json
import re

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from agent_core.mcp import _convert as convert
from agent_core.mcp._failures import Redactor, describe
from agent_core.mcp._naming import MAX_NAME, namespaced_names
from agent_core.mcp._servers import ServerSpec
from agent_core.mcp._toolset import build_tools

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def mcp_tool(name: str = "t", **fields: object) -> Tool:
    return Tool.model_validate({"name": name, "inputSchema": {"type": "object"}, **fields})


def test_names_are_prefixed_and_valid_for_providers() -> None:
    names = namespaced_names("files", ["echo", "read.file", "a b/c", "x" * 80, "y" * 80])
    assert names["echo"] == "files__echo"
    assert names["read.file"] == "files__read_file"
    assert names["a b/c"] == "files__a_b_c"
    assert all(VALID.match(name) for name in names.values())
    # Truncated names keep a hash of the original: two long names stay apart.
    assert len(names["x" * 80]) == MAX_NAME
    assert names["x" * 80] != names["y" * 80]
    assert names["x" * 80].startswith("files__xxx")


def test_names_that_collide_after_cleaning_stay_unique_and_stable() -> None:
    first = namespaced_names("s", ["a.b", "a_b", "a-b"])
    assert len(set(first.values())) == 3
    assert first["a.b"] == "s__a_b"  # the first one keeps the plain name
    assert namespaced_names("s", ["a.b", "a_b", "a-b"]) == first


def test_description_falls_back_to_title_then_a_generic_line() -> None:
    assert convert.description(mcp_tool(description="Reads a file."), "fs") == "Reads a file."
    assert convert.description(mcp_tool(description="  ", title="Reader"), "fs") == "Reader"
    assert convert.description(mcp_tool("read"), "fs") == "MCP tool read of fs"


def test_parameters_are_the_real_schema_with_an_object_root() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    assert convert.parameters(mcp_tool(inputSchema=schema)) == schema
    assert convert.parameters(mcp_tool(inputSchema={})) == {"type": "object", "properties": {}}
    assert convert.parameters(mcp_tool(inputSchema={"type": "string"})) == {
        "type": "object",
        "properties": {},
    }


def test_read_only_only_with_an_explicit_hint() -> None:
    assert convert.read_only(mcp_tool(annotations=ToolAnnotations(readOnlyHint=True)))
    assert not convert.read_only(mcp_tool(annotations=ToolAnnotations(readOnlyHint=False)))
    assert not convert.read_only(mcp_tool(annotations=ToolAnnotations(title="x")))
    assert not convert.read_only(mcp_tool())


def test_result_text_joins_text_and_notes_binary_parts() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="one"),
            ImageContent(type="image", data="A" * 12, mimeType="image/png"),
            AudioContent(type="audio", data="B" * 8, mimeType="audio/wav"),
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="file:///a.txt", text="body")
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///b.pdf", blob="QQ==", mimeType="x/pdf"),
            ),
            ResourceLink(type="resource_link", uri="file:///c.csv", name="c.csv"),
            TextContent(type="text", text="two"),
        ],
        structuredContent={"ignored": "because there is text"},
    )
    assert convert.result_text(result).split("\n") == [
        "one",
        "[image: image/png, 12 bytes base64 — not shown]",
        "[audio: audio/wav, 8 bytes base64 — not shown]",
        "body",
        "[resource: file:///b.pdf, x/pdf, 4 bytes base64 — not shown]",
        "[resource link: c.csv <file:///c.csv>]",
        "two",
    ]


def test_structured_content_is_json_when_there_is_no_text() -> None:
    result = CallToolResult(content=[], structuredContent={"t": 21.5, "city": "Hà Nội"})
    assert json.loads(convert.result_text(result)) == {"t": 21.5, "city": "Hà Nội"}
    assert convert.result_text(CallToolResult(content=[])) == convert.NO_CONTENT


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


def test_spec_derives_the_transport_and_checks_itself() -> None:
    assert ServerSpec("a", command="npx").transport == "stdio"
    assert ServerSpec("a", url="http://h/mcp").transport == "streamable_http"
    assert ServerSpec("a", url="http://h/sse", transport="sse").transport == "sse"
    with pytest.raises(ValueError, match="either command"):
        ServerSpec("a")
    with pytest.raises(ValueError, match="either command"):
        ServerSpec("a", command="x", url="http://h")
    with pytest.raises(ValueError, match="does not fit"):
        ServerSpec("a", command="x", transport="sse")
    with pytest.raises(ValueError, match="only letters"):
        ServerSpec("a.b", command="x")


def test_redaction_hides_headers_env_and_url_credentials() -> None:
    spec = ServerSpec(
        "a",
        url="https://user:pa55word@h.example/mcp?key=SECRETKEY",
        headers={"Authorization": "Bearer tok-123456"},
    )
    redact = Redactor(spec)
    text = redact(
        "401 for https://user:pa55word@h.example/mcp?key=SECRETKEY with Bearer tok-123456"
    )
    assert "pa55word" not in text and "SECRETKEY" not in text and "tok-123456" not in text
    env_spec = ServerSpec("b", command="x", env={"TOKEN": "s3cr3t-value", "N": "1"})
    assert Redactor(env_spec)("got s3cr3t-value, N=1") == "got ***, N=1"


def test_describe_reads_through_exception_groups() -> None:
    group = ExceptionGroup("tg", [ExceptionGroup("inner", [ConnectionError("refused")])])
    assert describe(group) == "ConnectionError: refused"
    assert describe(MCPError(CONNECTION_CLOSED, "Connection closed")) == "connection closed"
    assert describe(MCPError(-32602, "bad params")) == "MCP error -32602: bad params"
