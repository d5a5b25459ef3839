"""A stream read to its last event keeps its connection (``_transport.py``): the end of the
chunked body often reaches us a moment after ``[DONE]``, and aiohttp closes a connection whose
body was not read to the end, so every next call opened (for TLS, handshook) a new one."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_core.messages import Message
from agent_core.providers import _transport
from agent_core.providers._openai_compat import OpenAICompatProvider
from agent_core.providers.base import ModelRequest

_EVENTS = [
    {"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
    {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]


class LateEndServer:
    """HTTP/1.1 keep-alive; each answer's events, then its chunked terminator ``end_after``
    seconds later (``None``: never)."""

    def __init__(self, end_after: float | None) -> None:
        self.end_after = end_after
        self.connections = 0
        self.hung_up = 0  # connections the client closed while their body was unfinished
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> LateEndServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
                length = int(head.split("content-length:")[1].split("\r\n")[0])
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for data in [*map(json.dumps, _EVENTS), "[DONE]"]:
                    event = f"data: {data}\n\n".encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                if self.end_after is None:  # the body never ends
                    await reader.read()  # until the client hangs up
                    self.hung_up += 1
                    return
                await asyncio.sleep(self.end_after)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _ask(provider: OpenAICompatProvider) -> str:
    request = ModelRequest(model="m", messages=[Message(role="user", content="hi")])
    return (await provider.complete(request)).content


async def test_a_connection_whose_body_ends_late_goes_back_to_the_pool() -> None:
    async with LateEndServer(end_after=0.02) as server:
        provider = OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1")
        try:
            for _ in range(5):
                assert await _ask(provider) == "hi"  # answered at [DONE], not at the end
                await asyncio.sleep(0.3)  # kept: the next call comes after the body's end
        finally:
            await provider.aclose()
        assert server.connections == 1


async def _hung_up(server: LateEndServer) -> int:
    for _ in range(150):
        if server.hung_up:
            break
        await asyncio.sleep(0.02)  # kept: polled until the server sees the hang-up
    return server.hung_up


async def test_the_answer_does_not_wait_for_the_body_to_end_and_closing_gives_it_up() -> None:
    async with LateEndServer(end_after=None) as server:
        provider = OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1")
        try:  # BODY_END_WAIT is 5 s: the body's end is awaited behind the caller
            assert await asyncio.wait_for(_ask(provider), 2.5) == "hi"
        finally:
            await asyncio.wait_for(provider.aclose(), 2.5)
        assert await _hung_up(server) == 1


async def test_a_body_that_never_ends_costs_its_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_transport, "BODY_END_WAIT", 0.1)
    async with LateEndServer(end_after=None) as server:
        provider = OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1")
        try:
            assert await _ask(provider) == "hi"
            assert await _hung_up(server) == 1  # given up after BODY_END_WAIT
            assert await _ask(provider) == "hi"
        finally:
            await provider.aclose()
        assert server.connections == 2
