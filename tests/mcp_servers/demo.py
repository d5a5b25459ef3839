"""A real MCP server (the SDK's MCPServer) for the MCP client tests.

Run over stdio by default; ``--http PORT`` serves streamable HTTP and ``--sse PORT`` the legacy
SSE transport on 127.0.0.1. ``--tools N`` adds N generated tools (``gen_0``...) with distinct
descriptions, for the search-mode tests.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
READ_ONLY = ToolAnnotations(readOnlyHint=True)
# Topics for the generated tools: distinct words so a keyword search can tell them apart.
TOPICS = ("weather", "invoice", "calendar", "translate", "stock", "recipe", "flight", "email")

server = MCPServer("demo", log_level="WARNING")


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Echo the text back unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
async def slow_read(seconds: float, tag: str = "") -> str:
    """Wait, then report when the wait started and ended (read-only)."""
    start = time.monotonic()
    await asyncio.sleep(seconds)
    return f"{tag} {start:.3f} {time.monotonic():.3f}"


@server.tool()
async def slow_write(seconds: float, tag: str = "") -> str:
    """Like slow_read, but not read-only."""
    return await slow_read(seconds, tag)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(seconds: float, started: str = "") -> str:
    """Sleep for the given number of seconds (touching the file ``started`` first, if given)."""
    if started:
        await asyncio.to_thread(Path(started).touch)
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def crash() -> str:
    """Kill the server process at once."""
    os._exit(1)


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=READ_ONLY)
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ("" when absent or over stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool()
def image() -> ImageContent:
    """A small PNG image."""
    return ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png")


@server.tool()
def fail(reason: str = "it broke") -> CallToolResult:
    """An error result (isError) with the reason."""
    return CallToolResult(content=[TextContent(type="text", text=reason)], isError=True)


@server.tool()
def structured() -> CallToolResult:
    """Only structured content, no text."""
    return CallToolResult(content=[], structuredContent={"temperature": 21.5, "unit": "C"})


@server.tool()
def mixed() -> CallToolResult:
    """Text, an embedded text resource, a binary resource and a resource link."""
    blob = base64.b64encode(b"\x00\x01").decode()
    return CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.txt", text="note body"),
            ),
            EmbeddedResource(
                type="resource",
                resource={"uri": "file:///x.bin", "blob": blob, "mimeType": "application/pdf"},
            ),
            ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv"),
        ]
    )


@server.tool()
def protocol_error() -> str:
    """Answer with a JSON-RPC error instead of a result."""
    raise MCPError(code=-32602, message="bad thing")


@server.tool(name="weird.name/with spaces", title="Weird", description="")
def weird() -> str:
    return "weird called"


@server.tool(name="x" * 80)
def long_name() -> str:
    """A tool whose name is longer than providers allow."""
    return "long called"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool called ``name`` and tell the client the tool list changed."""

    def added() -> str:
        return f"{name} called"

    server.add_tool(added, name=name, description=f"Added at run time: {name}")
    await ctx.notify_tools_changed()  # 2026-07-28 clients: their subscriptions/listen stream
    await ctx.session.send_tool_list_changed()  # earlier clients: a plain notification
    return "added"


def generated_tool(index: int) -> None:
    def generated(query: str = "") -> str:
        return f"gen_{index}: {query}"

    topic = TOPICS[index % len(TOPICS)]
    server.add_tool(
        generated,
        name=f"gen_{index}",
        description=f"Look up {topic} data, variant {index}.",
        annotations=READ_ONLY,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--http", type=int, metavar="PORT")
    group.add_argument("--sse", type=int, metavar="PORT")
    args = parser.parse_args()
    for index in range(args.tools):
        generated_tool(index)
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    elif args.sse is not None:
        server.run("sse", host="127.0.0.1", port=args.sse)
    else:
        server.run()


if __name__ == "__main__":
    main()
