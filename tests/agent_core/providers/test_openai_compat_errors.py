"""OpenAICompatProvider against a real HTTP fake server (no httpx mocks): how failures reach
the caller. Each one becomes the ``ProviderError`` subclass the retry and fallback logic above
the provider decides on, without the API key in it; retrying is not the provider's job.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.utils import formatdate

import aiohttp
import httpx
import pytest
from structlog.testing import capture_logs

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from agent_core.providers import Delta, OpenAICompatProvider
from tests.fakes.llm_server import FakeLLM, delay, error, stream_error, text
from tests.provider_support import API_KEY, Collector, ask
from tests.raw_http import Handler, http_response, raw_server, read_request, sends


@pytest.fixture
async def provider(llm: FakeLLM) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider(llm.base_url + "/", API_KEY)
    yield p
    await p.aclose()


@pytest.mark.parametrize("stream", [True, False])
async def test_429_with_retry_after_seconds(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    llm.script(error(429, "Slow down", retry_after=7))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask(stream=stream))

    assert info.value.retry_after == 7.0
    assert info.value.status_code == 429
    assert info.value.transient
    assert "Slow down" in str(info.value)


async def test_429_with_retry_after_http_date(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(429, retry_after=formatdate(time.time() + 30, usegmt=True)))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask())

    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31


async def test_429_without_retry_after(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(429))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask())

    assert info.value.retry_after is None


@pytest.mark.parametrize("stream", [True, False])
async def test_500_is_unavailable(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    llm.script(error(503, "overloaded"))

    with pytest.raises(ProviderUnavailable) as info:
        await provider.complete(ask(stream=stream))

    assert info.value.status_code == 503
    assert info.value.transient
    assert "overloaded" in str(info.value)


@pytest.mark.parametrize("stream", [True, False])
async def test_400_is_provider_error_with_message_and_no_key(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    # A server that echoes the key back in its error must not leak it through us.
    llm.script(error(400, f"Invalid model 'gpt-x' for key {API_KEY}"))

    with capture_logs() as logs, pytest.raises(ProviderError) as info:
        await provider.complete(ask(stream=stream))

    assert type(info.value) is ProviderError
    assert info.value.status_code == 400
    assert not info.value.transient
    assert "Invalid model 'gpt-x' for key" in str(info.value)
    assert API_KEY not in str(info.value)
    assert any(entry["event"] == "provider.error" for entry in logs)
    assert API_KEY not in json.dumps(logs, default=str)


async def test_read_timeout(llm: FakeLLM) -> None:
    llm.script(delay(5.0, text("too late")))
    provider = OpenAICompatProvider(llm.base_url, timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as info:
            await provider.complete(ask())
    finally:
        await provider.aclose()

    assert time.monotonic() - started < 3
    assert info.value.transient
    assert isinstance(info.value.__cause__, TimeoutError)  # aiohttp's SocketTimeoutError


async def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nobody listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", API_KEY)
    try:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.complete(ask())
    finally:
        await provider.aclose()

    assert info.value.transient
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorError)
    assert API_KEY not in str(info.value)


async def test_stream_cut_off_is_unavailable(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(text("partial answ", cut_off=True))
    collector = Collector()

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask(), collector)

    assert collector.of("text") == ["partial answ"]


async def test_error_event_in_stream(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(stream_error("model crashed"))

    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())

    assert type(info.value) is ProviderError
    assert "model crashed" in str(info.value)


async def test_delta_handler_errors_are_not_translated(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    # A channel failing to edit its message (itself over httpx) is not a provider outage.
    async def failing(delta: Delta) -> None:
        raise httpx.ConnectError("telegram is down")

    with pytest.raises(httpx.ConnectError, match="telegram is down"):
        await provider.complete(ask(), failing)


async def test_no_retry_inside_provider(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(500), text("second"))

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask())

    assert len(llm.chat_requests) == 1
    assert llm.remaining == 1


async def test_wrong_key_is_401_provider_error() -> None:
    async with FakeLLM(api_key="sk-right") as server:
        wrong = OpenAICompatProvider(server.base_url, "sk-wrong")
        right = OpenAICompatProvider(server.base_url, "sk-right")
        try:
            with pytest.raises(ProviderError) as info:
                await wrong.complete(ask())
            assert info.value.status_code == 401
            assert (await right.complete(ask("ok"))).content == "echo: ok"
        finally:
            await wrong.aclose()
            await right.aclose()


# -- failures the fake server cannot stage: a raw HTTP/1.1 server on a socket ------------------

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_text(piece: str, finish_reason: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": piece}, "finish_reason": finish_reason}
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


@asynccontextmanager
async def answering(answer: Handler) -> AsyncIterator[str]:
    """A raw server that reads one request, then lets ``answer`` write whatever it likes;
    yields the provider's base URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await answer(reader, writer)

    async with raw_server(handle) as url:
        yield f"{url}/v1"


async def test_server_hanging_up_mid_stream_is_unavailable() -> None:
    # then close without the terminating chunk
    answer = sends(SSE_HEAD + http_chunk(sse_text("partial")))

    collector = Collector()
    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY)
        try:
            with pytest.raises(ProviderUnavailable) as info:
                await provider.complete(ask(), collector)
        finally:
            await provider.aclose()

    assert collector.of("text") == ["partial"]
    assert isinstance(info.value.__cause__, aiohttp.ClientPayloadError)
    assert info.value.transient
    assert API_KEY not in str(info.value)


async def test_stall_mid_stream_is_a_timeout() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + http_chunk(sse_text("partial")))
        await writer.drain()
        await reader.read()  # silent until the client gives up and closes

    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY, timeout=0.3)
        try:
            started = time.monotonic()
            with pytest.raises(ProviderTimeout) as info:
                await provider.complete(ask())
        finally:
            await provider.aclose()

    assert time.monotonic() - started < 3
    assert info.value.transient


async def test_malformed_chunk_is_provider_error_without_key() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + http_chunk(f"data: {{oops {API_KEY}\n\n".encode()))
        writer.write(http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY)
        try:
            with pytest.raises(ProviderError) as info:
                await provider.complete(ask())
        finally:
            await provider.aclose()

    assert type(info.value) is ProviderError
    assert "not valid JSON" in str(info.value)
    assert API_KEY not in str(info.value)


async def test_crlf_comments_and_split_chunks_are_parsed() -> None:
    # CRLF line ends, a keep-alive comment, an event split across TCP writes mid-line.
    first = sse_text("Hel").replace(b"\n", b"\r\n")
    last = sse_text("lo", "stop")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + http_chunk(b": keep-alive\r\n\r\n" + first[:9]))
        await writer.drain()
        await asyncio.sleep(0.01)  # kept: the fake server's separate TCP writes
        writer.write(http_chunk(first[9:] + last[:20]))
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(http_chunk(last[20:] + b"data: [DONE]\r\n\r\n") + b"0\r\n\r\n")
        await writer.drain()

    collector = Collector()
    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY)
        try:
            response = await provider.complete(ask(), collector)
        finally:
            await provider.aclose()

    assert collector.of("text") == ["Hel", "lo"]
    assert response.content == "Hello"
    assert response.finish_reason == "stop"


@pytest.mark.parametrize("stream", [True, False])
async def test_html_error_page_is_unavailable(stream: bool) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"

    answer = sends(http_response(b"502 Bad Gateway", b"text/html", page))

    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY)
        try:
            with pytest.raises(ProviderUnavailable) as info:
                await provider.complete(ask(stream=stream))
        finally:
            await provider.aclose()

    assert info.value.status_code == 502
    assert "502 Bad Gateway</body>" in str(info.value)


async def test_json_answer_to_a_stream_request_is_accepted() -> None:
    # A server that ignores ``stream: true`` and answers with one chat.completion body.
    body = json.dumps(
        {"choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}]}
    ).encode()

    answer = sends(http_response(b"200 OK", b"application/json", body))

    async with answering(answer) as url:
        provider = OpenAICompatProvider(url, API_KEY)
        try:
            response = await provider.complete(ask(stream=True))
        finally:
            await provider.aclose()

    assert response.content == "whole"
    assert response.finish_reason == "stop"
