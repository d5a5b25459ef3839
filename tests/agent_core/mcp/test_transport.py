"""The transport for a ServerSpec, and the read stream that reports its end."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream
from mcp.shared.exceptions import MCPError

from agent_core.mcp._servers import ServerSpec
from agent_core.mcp._transport import Item, WatchedReadStream, open_transport
from tests.mcp_servers.harness import http_server, stdio_spec
from tests.waiting import wait_until

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")


class Ends:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@asynccontextmanager
async def watched() -> AsyncIterator[tuple[Any, WatchedReadStream, Ends]]:
    send, receive = anyio.create_memory_object_stream[Item](10)
    ends = Ends()
    async with send, receive:
        yield send, WatchedReadStream(receive, ends), ends


async def test_items_pass_through_and_the_end_is_reported_once() -> None:
    async with watched() as (send, stream, ends):
        error = ValueError("a transport error is an item too")
        await send.send(error)
        await send.aclose()
        assert await stream.receive() is error
        assert ends.count == 0
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
        assert ends.count == 1


async def test_iteration_stops_at_the_end_and_reports_it() -> None:
    async with watched() as (send, stream, ends):
        items = [ValueError("1"), ValueError("2")]
        async with send:
            for item in items:
                await send.send(item)
        assert [item async for item in stream] == items
        assert ends.count == 1


async def test_a_stream_closed_on_our_side_reports_the_end_too() -> None:
    async with watched() as (_, stream, ends):
        async with stream:
            pass  # leaving closes the inner stream
        with pytest.raises(anyio.ClosedResourceError):
            await stream.receive()
        assert ends.count == 1


async def test_a_broken_stream_reports_the_end() -> None:
    ends = Ends()

    class Broken:
        async def receive(self) -> Item:
            raise anyio.BrokenResourceError

        async def aclose(self) -> None:
            pass

    stream = WatchedReadStream(Broken(), ends)  # type: ignore[arg-type]
    with pytest.raises(anyio.BrokenResourceError):
        await stream.receive()
    assert ends.count == 1


async def test_the_senders_context_is_passed_on() -> None:
    raw_send, raw_receive = anyio.create_memory_object_stream[Any](10)
    send, receive = ContextSendStream[Item](raw_send), ContextReceiveStream[Item](raw_receive)
    async with send, WatchedReadStream(receive, Ends()) as stream:
        assert stream.last_context is None
        MARK.set("sender")
        await send.send(ValueError("x"))
        MARK.set("")
        await stream.receive()
        assert stream.last_context is not None and stream.last_context.get(MARK) == "sender"
    # A plain memory stream has no context to pass on.
    async with watched() as (_, plain, _):
        assert plain.last_context is None


async def test_a_stdio_server_is_spawned_and_its_exit_reported() -> None:
    ends = Ends()
    async with Client(open_transport(stdio_spec(), ends), cache=None) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
        assert ends.count == 0
        with pytest.raises(MCPError):
            await client.call_tool("crash", {}, read_timeout_seconds=10)
        await wait_until(lambda: ends.count == 1, what="the end of the stdio stream")


async def test_stdio_gets_the_configured_arguments() -> None:
    # "--tools 2" makes the demo add two generated tools: the args reached the program.
    spec = stdio_spec("demo", "--tools", "2")
    async with Client(open_transport(spec, Ends()), cache=None) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"gen_0", "gen_1"} <= names and "gen_2" not in names


@pytest.mark.parametrize(("mode", "transport"), [("http", None), ("sse", "sse")])
async def test_http_transports_send_the_configured_headers(mode: str, transport: Any) -> None:
    async with http_server(mode) as server:
        spec = ServerSpec(
            "web", url=server.url, transport=transport, headers={"X-Api-Key": "k-123"}
        )
        async with Client(open_transport(spec, Ends()), cache=None) as client:
            result = await client.call_tool("header", {"name": "X-Api-Key"})
    assert result.content[0].text == "k-123"  # type: ignore[union-attr]
