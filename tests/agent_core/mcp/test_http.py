"""McpManager against the demo MCP server over HTTP: streamable HTTP and the older SSE."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agent_core.errors import ToolError
from agent_core.mcp._manager import McpManager
from agent_core.mcp._servers import ServerSpec, ServerState, ServerStatus
from agent_core.tools.base import Tool, ToolContext
from tests.mcp_servers.harness import http_server
from tests.waiting import wait_until

CTX = ToolContext(Path("."), session_key="s", user_id="u", agent_id="a", run_id="r")
TOKEN = "tok-0123456789"


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def status(manager: McpManager) -> ServerStatus:
    return manager.statuses()[0]


@pytest.mark.parametrize(("mode", "transport"), [("http", "streamable_http"), ("sse", "sse")])
async def test_an_http_server_serves_tools_and_is_reconnected_after_an_outage(
    mode: str, transport: str
) -> None:
    async with http_server(mode) as server:
        spec = ServerSpec(
            "web",
            url=server.url,
            transport="sse" if mode == "sse" else None,
            headers={"X-Token": TOKEN},
            timeout=5,
        )
        manager = McpManager([spec], backoff_base=0.1, backoff_cap=0.5, health_interval=0.3)
        try:
            await manager.start()
            assert (status(manager).state, status(manager).transport) == (
                ServerState.READY,
                transport,
            )
            tools = by_name(await manager.tools())
            assert tools["web__echo"].read_only
            assert await tools["web__echo"].handler({"text": "über"}, CTX) == "über"
            assert await tools["web__header"].handler({"name": "X-Token"}, CTX) == TOKEN

            changes: list[str] = []
            manager.on_change(changes.append)
            await tools["web__add_tool"].handler({"name": "fresh"}, CTX)
            await wait_until(lambda: "web__fresh" in status(manager).tools, timeout=5)
            assert changes == ["web"]

            await server.stop()  # the server goes away
            with pytest.raises(ToolError, match=r"^MCP server 'web' "):
                await tools["web__echo"].handler({"text": "x"}, CTX)
            await wait_until(lambda: status(manager).state is not ServerState.READY, timeout=5)
            assert manager.degraded
            started = time.monotonic()
            with pytest.raises(ToolError, match="MCP server 'web' is"):
                await tools["web__echo"].handler({"text": "x"}, CTX)
            assert time.monotonic() - started < 1
            assert TOKEN not in (status(manager).error or "")

            await server.start()  # back on the same port
            await wait_until(lambda: status(manager).state is ServerState.READY, timeout=15)
            assert not manager.degraded
            assert status(manager).restarts >= 1
            assert await tools["web__echo"].handler({"text": "again"}, CTX) == "again"
        finally:
            await manager.aclose()
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_an_unreachable_http_server_fails_and_says_why() -> None:
    async with http_server("http") as server:
        url = server.url
    # The server is gone: nothing listens on that port any more.
    manager = McpManager([ServerSpec("web", url=url, startup_timeout=5)], backoff_base=0.1)
    try:
        await manager.start()
        assert status(manager).state is ServerState.FAILED
        assert "connect" in (status(manager).error or "").lower()
        assert await manager.tools() == []
    finally:
        await manager.aclose()
