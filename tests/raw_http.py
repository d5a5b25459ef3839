"""A raw HTTP/1.1 server on 127.0.0.1 for failures a fake API server cannot stage: a silent
server, a hang-up mid-response, a truncated body, a non-JSON error page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    """A TCP server on 127.0.0.1 running ``handler`` per connection; yields its base URL."""
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        # Handlers end when the client hangs up; a cancelled one would be logged by asyncio.
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        await server.wait_closed()


async def read_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's head, its body (by Content-Length) read and dropped."""
    head = await read_head(reader)
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    await reader.readexactly(length)
    return head


def sends(data: bytes) -> Handler:
    """A handler that writes ``data`` and hangs up: a canned response, whole or cut short."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()

    return handler


def http_response(status: bytes, content_type: bytes, body: bytes) -> bytes:
    head = b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
    return head % (status, content_type, len(body)) + body
