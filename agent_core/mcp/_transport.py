"""The SDK transport for a ``ServerSpec``, with the end of its read stream reported.

The SDK's session does not tell anybody when a stdio server exits (or an SSE stream ends)
while no request is pending; the next call would only find out then. Watching the read stream
the session reads from lets the supervisor notice a crash at once and restart the server.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Self

import anyio
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from agent_core.mcp._servers import ServerSpec

Item = SessionMessage | Exception


class WatchedReadStream:
    """A read stream that calls ``on_end`` once when the other side closes it."""

    def __init__(self, inner: ReadStream[Item], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end

    @property
    def last_context(self) -> contextvars.Context | None:
        # The dispatcher runs handlers in the sender's context when the stream carries one.
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    def _ended(self) -> None:
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end()

    async def receive(self) -> Item:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def open_transport(
    spec: ServerSpec, on_end: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    """Connect to the server (spawning it for stdio); ``on_end`` runs when its stream ends."""
    async with AsyncExitStack() as stack:
        if spec.kind == "stdio":
            assert spec.command is not None  # ServerSpec checked it
            params = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=dict(spec.env) or None,
                cwd=spec.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(params))
        elif spec.kind == "sse":
            assert spec.url is not None
            streams = await stack.enter_async_context(
                sse_client(spec.url, headers=dict(spec.headers) or None)
            )
        else:
            assert spec.url is not None
            # The SDK does not close a client it was given: the exit stack does.
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(spec.headers) or None)
            )
            streams = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=http)
            )
        read_stream, write_stream = streams
        yield WatchedReadStream(read_stream, on_end), write_stream
