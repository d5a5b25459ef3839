"""AnthropicProvider against failures the fake Messages API cannot stage, served by a raw
HTTP/1.1 server on a socket (no aiohttp mocks): a hang-up or a stall mid-stream, malformed or
oddly framed SSE, an HTML error page, a JSON answer to a stream request. Each failure becomes
the ``ProviderError`` subclass the loop's retry logic decides on, without the API key in it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable
from agent_core.providers import AnthropicProvider, Delta, ModelRequest
from tests import provider_support
from tests.provider_support import Collector
from tests.raw_http import Handler, http_response, raw_server, read_request, sends

KEY = "sk-ant-test-abcdef0123456789"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
LAST_CHUNK = b"0\r\n\r\n"


def ask(*, stream: bool = True) -> ModelRequest:
    return provider_support.ask("hi", model="claude-test", stream=stream)


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(payload: dict[str, Any], *, end: bytes = b"\n") -> bytes:
    event = f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()
    return event.replace(b"\n", end)


START = sse({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}) + sse(
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
)


def text_delta(piece: str) -> bytes:
    return sse(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
    )


END = sse(
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}
) + sse({"type": "message_stop"})


@asynccontextmanager
async def answering(answer: Handler) -> AsyncIterator[AnthropicProvider]:
    """A provider whose server reads one request, then lets ``answer`` write what it likes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await answer(reader, writer)

    async with raw_server(handle) as url:
        provider = AnthropicProvider(url, KEY, timeout=0.3)
        try:
            yield provider
        finally:
            await provider.aclose()


async def test_server_hanging_up_mid_stream_is_unavailable() -> None:
    # then close without the terminating chunk
    answer = sends(SSE_HEAD + http_chunk(START + text_delta("partial")))

    collector = Collector()
    async with answering(answer) as provider:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.complete(ask(), collector)

    assert collector.of("text") == ["partial"]
    assert isinstance(info.value.__cause__, aiohttp.ClientPayloadError)
    assert info.value.transient
    assert KEY not in str(info.value)


async def test_clean_end_without_message_stop_is_unavailable() -> None:
    answer = sends(SSE_HEAD + http_chunk(START + text_delta("partial")) + LAST_CHUNK)

    async with answering(answer) as provider:
        with pytest.raises(ProviderUnavailable, match="no message_stop") as info:
            await provider.complete(ask())
    assert info.value.transient


async def test_stall_mid_stream_is_a_timeout() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + http_chunk(START + text_delta("partial")))
        await writer.drain()
        await reader.read()  # silent until the client gives up and closes

    async with answering(answer) as provider:
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as info:
            await provider.complete(ask())

    assert time.monotonic() - started < 3
    assert info.value.transient
    assert isinstance(info.value.__cause__, TimeoutError)  # aiohttp's SocketTimeoutError


async def test_connection_refused_is_unavailable_without_key() -> None:
    provider = AnthropicProvider("http://127.0.0.1:9", KEY)
    try:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.complete(ask())
    finally:
        await provider.aclose()
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorError)
    assert KEY not in str(info.value)


async def test_malformed_event_data_is_provider_error_without_key() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        bad = f"event: content_block_delta\ndata: {{oops {KEY}\n\n".encode()
        writer.write(SSE_HEAD + http_chunk(START + bad + END) + LAST_CHUNK)
        await writer.drain()

    async with answering(answer) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(ask())

    assert type(info.value) is ProviderError
    assert "not valid JSON" in str(info.value)
    assert KEY not in str(info.value)


async def test_event_without_its_index_is_a_malformed_response() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        orphan = sse({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}})
        writer.write(SSE_HEAD + http_chunk(START + orphan + END) + LAST_CHUNK)
        await writer.drain()

    async with answering(answer) as provider:
        with pytest.raises(ProviderError, match="malformed response") as info:
            await provider.complete(ask())
    assert type(info.value) is ProviderError and not info.value.transient


async def test_error_event_named_by_its_event_field() -> None:
    # Only the SSE ``event:`` line says "error"; the payload has no ``type``.
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        payload = {"error": {"type": "overloaded_error", "message": f"busy {KEY}"}}
        bad = f"event: error\ndata: {json.dumps(payload)}\n\n".encode()
        writer.write(SSE_HEAD + http_chunk(START + bad) + LAST_CHUNK)
        await writer.drain()

    async with answering(answer) as provider:
        with pytest.raises(ProviderUnavailable, match="overloaded_error: busy") as info:
            await provider.complete(ask())
    assert KEY not in str(info.value)


async def test_crlf_pings_and_split_chunks_are_parsed() -> None:
    # CRLF line ends, a keep-alive comment, a ping event, an event split mid-line across writes.
    first = text_delta("Hel").replace(b"\n", b"\r\n")
    last = text_delta("lo") + END
    ping = sse({"type": "ping"}, end=b"\r\n")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + http_chunk(START + b": keep-alive\r\n\r\n" + ping + first[:30]))
        await writer.drain()
        await asyncio.sleep(0.01)  # kept: the fake server's separate TCP writes
        writer.write(http_chunk(first[30:] + last[:20]))
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(http_chunk(last[20:]) + LAST_CHUNK)
        await writer.drain()

    collector = Collector()
    async with answering(answer) as provider:
        response = await provider.complete(ask(), collector)

    assert collector.of("text") == ["Hel", "lo"]
    assert response.content == "Hello"
    assert response.finish_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)


async def test_delta_handler_errors_are_not_translated() -> None:
    answer = sends(SSE_HEAD + http_chunk(START + text_delta("x") + END) + LAST_CHUNK)

    async def broken(delta: Delta) -> None:
        raise RuntimeError("channel edit failed")

    async with answering(answer) as provider:
        with pytest.raises(RuntimeError, match="channel edit failed"):
            await provider.complete(ask(), broken)


@pytest.mark.parametrize("stream", [True, False])
async def test_html_error_page_is_unavailable(stream: bool) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"

    answer = sends(http_response(b"502 Bad Gateway", b"text/html", page))

    async with answering(answer) as provider:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.complete(ask(stream=stream))

    assert info.value.status_code == 502
    assert "502 Bad Gateway</body>" in str(info.value)


async def test_408_is_a_timeout() -> None:
    body = json.dumps({"type": "error", "error": {"type": "timeout", "message": "too slow"}})

    answer = sends(http_response(b"408 Request Timeout", b"application/json", body.encode()))

    async with answering(answer) as provider:
        with pytest.raises(ProviderTimeout, match="HTTP 408: too slow") as info:
            await provider.complete(ask(stream=False))
    assert info.value.status_code == 408


async def test_json_answer_to_a_stream_request_is_accepted() -> None:
    # A proxy that ignores ``stream: true`` and answers with one message body.
    body = json.dumps(
        {
            "type": "message",
            "content": [{"type": "text", "text": "whole"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    ).encode()

    answer = sends(http_response(b"200 OK", b"application/json", body))

    async with answering(answer) as provider:
        response = await provider.complete(ask(stream=True))

    assert response.content == "whole"
    assert response.finish_reason == "end_turn"
