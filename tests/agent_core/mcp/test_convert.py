"""MCP results, descriptions and schemas as the agent sees them (no server needed)."""

from __future__ import annotations

import json

from mcp.types import (
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


def mcp_tool(name: str = "t", **fields: object) -> Tool:
    return Tool.model_validate({"name": name, "inputSchema": {"type": "object"}, **fields})


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
