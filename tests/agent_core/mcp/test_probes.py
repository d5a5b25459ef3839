"""The supervisor's probes against in-process servers: the whole listing, and liveness."""

from __future__ import annotations

import pytest
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from agent_core.mcp._probes import MAX_PAGES, check_alive, is_modern, list_tools
from tests.mcp_servers.harness import stdio_spec

MODES = ["auto", "legacy"]


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def paging_server(pages: int, requests: list[str | None]) -> Server[object]:
    """Lists one tool per page, ``pages`` pages; ``pages=0`` never stops paginating."""

    async def on_list_tools(
        ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params else None
        requests.append(cursor)
        index = int(cursor or 0)
        last = pages and index + 1 >= pages
        return types.ListToolsResult(
            tools=[tool(f"t{index}")], next_cursor=None if last else str(index + 1)
        )

    return Server("paging", on_list_tools=on_list_tools)


@pytest.mark.parametrize("mode", MODES)
async def test_list_tools_follows_every_page(mode: str) -> None:
    requests: list[str | None] = []
    async with Client(paging_server(3, requests), mode=mode, cache=None) as client:
        assert [t.name for t in await list_tools(client)] == ["t0", "t1", "t2"]
    assert requests == [None, "1", "2"]


async def test_a_server_that_paginates_forever_is_cut_off() -> None:
    requests: list[str | None] = []
    async with Client(paging_server(0, requests), cache=None) as client:
        tools = await list_tools(client)
    assert len(tools) == MAX_PAGES == len(requests)


async def test_a_server_without_tools_lists_nothing_and_is_not_asked() -> None:
    async with Client(Server("prompts only"), cache=None) as client:
        assert client.server_capabilities.tools is None
        assert await list_tools(client) == []


@pytest.mark.parametrize(("mode", "modern"), [("auto", True), ("legacy", False)])
async def test_is_modern_follows_the_negotiated_protocol(mode: str, modern: bool) -> None:
    async with Client(Server("s"), mode=mode, cache=None) as client:
        assert is_modern(client) is modern


@pytest.mark.parametrize("mode", MODES)
async def test_a_live_server_passes_the_check(mode: str) -> None:
    async with Client(Server("s"), mode=mode, cache=None) as client:
        await check_alive(client)


async def test_an_error_answer_to_the_ping_still_shows_the_server_alive() -> None:
    async def on_ping(
        ctx: ServerRequestContext[object], params: types.RequestParams | None
    ) -> types.EmptyResult:
        raise MCPError(-32603, "ping is broken here")

    async with Client(Server("s", on_ping=on_ping), mode="legacy", cache=None) as client:
        await check_alive(client)


async def test_a_timed_out_ping_is_raised() -> None:
    async def on_ping(
        ctx: ServerRequestContext[object], params: types.RequestParams | None
    ) -> types.EmptyResult:
        raise MCPError(REQUEST_TIMEOUT, "too slow")

    async with Client(Server("s", on_ping=on_ping), mode="legacy", cache=None) as client:
        with pytest.raises(MCPError) as caught:
            await check_alive(client)
    assert caught.value.code == REQUEST_TIMEOUT


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_that_exited_fails_the_check(mode: str) -> None:
    spec = stdio_spec()
    assert spec.command is not None
    params = StdioServerParameters(command=spec.command, args=list(spec.args))
    async with Client(params, mode=mode, cache=None) as client:
        await check_alive(client)
        with pytest.raises(MCPError):
            await client.call_tool("crash", {}, read_timeout_seconds=10)
        with pytest.raises(MCPError) as caught:
            await check_alive(client)
    assert caught.value.code == CONNECTION_CLOSED
