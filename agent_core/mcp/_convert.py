"""From MCP to the agent's terms: a tool's definition, and a call result as text for the model.

Text parts are what the model reads. Binary parts (images, audio, blobs) cannot go into a text
tool result, so each becomes a one-line note saying what was left out, rather than megabytes
of base64 the model can do nothing with.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as McpTool

NO_CONTENT = "(the tool returned no content)"


def description(tool: McpTool, server: str) -> str:
    """The server's own description; its title or a generic line when it gave none."""
    text = (tool.description or "").strip()
    if text:
        return text
    if tool.title and tool.title.strip():
        return tool.title.strip()
    return f"MCP tool {tool.name} of {server}"


def parameters(tool: McpTool) -> dict[str, Any]:
    """The tool's input schema; providers want an object at the root."""
    schema = dict(tool.input_schema or {})
    if schema.get("type", "object") != "object":
        # 2026-07-28 allows any root schema, but a call's arguments are always an object.
        return {"type": "object", "properties": {}}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def read_only(tool: McpTool) -> bool:
    """Only an explicit ``readOnlyHint: true`` lets a call run alongside others."""
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def _binary_note(kind: str, mime_type: str | None, data: str, uri: str | None = None) -> str:
    where = f"{uri}, " if uri else ""
    return f"[{kind}: {where}{mime_type or 'unknown type'}, {len(data)} bytes base64 — not shown]"


def _part(block: object) -> str | None:
    """One content block as text; None for a block of an unknown kind."""
    match block:
        case TextContent(text=text):
            return text
        case ImageContent(mime_type=mime, data=data):
            return _binary_note("image", mime, data)
        case AudioContent(mime_type=mime, data=data):
            return _binary_note("audio", mime, data)
        case EmbeddedResource(resource=TextResourceContents(text=text)):
            return text
        case EmbeddedResource(resource=BlobResourceContents(uri=uri, mime_type=mime, blob=blob)):
            return _binary_note("resource", mime, blob, uri)
        case ResourceLink(uri=uri, name=name, mime_type=mime):
            kind = f", {mime}" if mime else ""
            return f"[resource link: {name} <{uri}>{kind}]"
    return None


def result_text(result: CallToolResult) -> str:
    """The text the model reads: the text parts, a note per binary part, and the structured
    content as JSON when the server sent no text."""
    parts = [text for block in result.content if (text := _part(block)) is not None]
    has_text = any(isinstance(block, TextContent) for block in result.content)
    if result.structured_content is not None and not has_text:
        structured = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        parts.append(structured)
    return "\n".join(parts) if parts else NO_CONTENT
