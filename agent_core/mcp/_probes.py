"""What the supervisor asks of a live server: its whole tool listing, and whether it is alive."""

from __future__ import annotations

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from mcp.types import Tool as McpTool
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

MAX_PAGES = 100  # of one tools/list: a server paginating forever cannot hang a listing


def is_modern(client: Client) -> bool:
    """A 2026-07-28 connection: no ping, change notifications only through subscriptions."""
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


async def list_tools(client: Client) -> list[McpTool]:
    if client.server_capabilities.tools is None:
        return []  # a server of only prompts or resources: nothing to list, nothing wrong
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def check_alive(client: Client) -> None:
    """Raise when the connection is gone; any answer, even an error, shows the server is alive.
    The caller bounds the wait."""
    try:
        if is_modern(client):
            await client.session.send_discover(client.protocol_version)
        else:
            await client.session.send_ping()
    except MCPError as exc:
        if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            raise
