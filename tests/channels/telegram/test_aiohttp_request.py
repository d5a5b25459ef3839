"""AiohttpRequest against real servers on 127.0.0.1: the fake Bot API, raw sockets that misbehave.

The calls that work are checked with PTB's own HTTPXRequest too, so the fake sees the same
requests from both.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from telegram import Bot
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut
from telegram.request import BaseRequest, HTTPXRequest

from channels.telegram._aiohttp_request import AiohttpRequest
from tests.fakes.telegram_server import FakeTelegram, Upload
from tests.raw_http import raw_server, read_head

CLASSES = [AiohttpRequest, HTTPXRequest]


def make_bot(tg: FakeTelegram, request: BaseRequest | None = None) -> Bot:
    return Bot(
        tg.token,
        base_url=f"{tg.base_url}/bot",
        request=request or AiohttpRequest(connection_pool_size=8, read_timeout=5.0),
        get_updates_request=AiohttpRequest(connection_pool_size=2, read_timeout=5.0),
    )


# -- calls that work --------------------------------------------------------------------------


@pytest.mark.parametrize("request_class", CLASSES)
async def test_get_me_and_a_send_reach_the_fake_intact(
    tg: FakeTelegram, request_class: type[BaseRequest]
) -> None:
    text = "héllo wörld 👋\nsecond line & a=b+c %20 <done>\n\n"
    async with make_bot(tg, request_class()) as bot:  # type: ignore[call-arg]
        assert bot.username == tg.bot_username  # getMe
        message = await bot.send_message(chat_id=42, text=text, message_thread_id=7)
    assert message.text == text
    assert [c.method for c in tg.calls] == ["getMe", "sendMessage"]
    assert tg.sent[0]["text"] == text
    assert tg.sent[0]["chat_id"] == 42
    assert tg.sent[0]["message_thread_id"] == 7


@pytest.mark.parametrize("request_class", CLASSES)
async def test_a_document_upload_reaches_the_fake_byte_for_byte(
    tg: FakeTelegram, request_class: type[BaseRequest]
) -> None:
    data = bytes(range(256)) * 40 + b"\r\n--not-a-boundary\r\n"
    async with make_bot(tg, request_class()) as bot:  # type: ignore[call-arg]
        message = await bot.send_document(
            chat_id=42, document=data, filename="rapport été.bin", caption="voilà\nle fichier"
        )
    call = tg.calls_of("sendDocument")[0]
    upload = call.params["document"]
    assert isinstance(upload, Upload)
    assert upload.data == data
    assert upload.filename == "rapport été.bin"
    assert 'filename="rapport été.bin"' in upload.disposition  # raw UTF-8, as httpx writes it
    assert upload.content_type == "application/octet-stream"
    assert call.params["chat_id"] == 42
    assert call.params["caption"] == "voilà\nle fichier"
    assert message.document is not None
    assert message.document.file_size == len(data)
    assert message.caption == "voilà\nle fichier"


async def test_long_polling_gets_its_poll_time_on_top_of_the_read_timeout(
    tg: FakeTelegram,
) -> None:
    # PTB adds getUpdates' timeout to the request's read_timeout: a 1 s poll with a 0.5 s read
    # timeout must wait the poll out, not time out.
    bot = Bot(
        tg.token,
        base_url=f"{tg.base_url}/bot",
        get_updates_request=AiohttpRequest(connection_pool_size=2, read_timeout=0.5),
    )
    async with bot:
        started = time.monotonic()
        assert await bot.get_updates(timeout=1) == ()
        assert time.monotonic() - started >= 0.9


# -- Telegram's error answers: parsed by PTB from the status and body we return ------------------


async def test_a_429_is_retry_after(tg: FakeTelegram) -> None:
    tg.fail_next("sendMessage", 429, retry_after=3)
    async with make_bot(tg) as bot:
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(chat_id=42, text="hi")
    assert caught.value.retry_after in (3, dt.timedelta(seconds=3))


async def test_a_400_is_bad_request_with_telegrams_description(tg: FakeTelegram) -> None:
    tg.fail_next("sendMessage", 400, "Bad Request: chat not found")
    async with make_bot(tg) as bot:
        with pytest.raises(BadRequest, match="Chat not found"):
            await bot.send_message(chat_id=42, text="hi")


# -- transport failures -----------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out_after_the_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        await reader.read()  # until the client gives up and closes

    async with raw_server(silent) as base, AiohttpRequest(read_timeout=0.3) as request:
        started = time.monotonic()
        with pytest.raises(TimedOut) as caught:
            await request.post(f"{base}/botX/getMe")
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 2.0
        assert "Pool timeout" not in caught.value.message

        started = time.monotonic()  # a per-call read timeout overrides the default
        with pytest.raises(TimedOut):
            await request.post(f"{base}/botX/getMe", read_timeout=0.1)
        assert time.monotonic() - started < 0.25


async def test_a_refused_connection_is_a_network_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with AiohttpRequest() as request:
        with pytest.raises(NetworkError) as caught:
            await request.post(f"http://127.0.0.1:{port}/botX/getMe")
    assert not isinstance(caught.value, TimedOut)
    assert caught.value.message.startswith("aiohttp.ClientConnectorError: ")


async def test_a_connection_closed_mid_response_is_a_network_error() -> None:
    async def truncated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"ok": true, "res')
        await writer.drain()

    async with raw_server(truncated) as base, AiohttpRequest() as request:
        with pytest.raises(NetworkError) as caught:
            await request.post(f"{base}/botX/getMe")
    assert not isinstance(caught.value, TimedOut)
    assert caught.value.message.startswith("aiohttp.ClientPayloadError: ")


async def test_a_connection_closed_before_any_answer_is_a_network_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)

    async with raw_server(hang_up) as base, AiohttpRequest() as request:
        with pytest.raises(NetworkError) as caught:
            await request.post(f"{base}/botX/getMe")
    assert not isinstance(caught.value, TimedOut)
    assert caught.value.message.startswith("aiohttp.ServerDisconnectedError: ")


async def test_a_full_pool_is_a_pool_timeout_and_the_request_is_not_sent(
    tg: FakeTelegram,
) -> None:
    tg.hold("sendMessage")
    request = AiohttpRequest(connection_pool_size=1, pool_timeout=0.2)
    async with make_bot(tg, request) as bot:
        first = asyncio.create_task(bot.send_message(chat_id=42, text="one"))
        await tg.wait_for(lambda: tg.held)
        with pytest.raises(TimedOut, match="Pool timeout"):
            await bot.send_message(chat_id=42, text="two")
        assert [c.params["text"] for c in tg.held] == ["one"]
        assert not tg.calls_of("sendMessage")
        tg.release()  # the held call answers 502
        with pytest.raises(NetworkError):
            await first
        await bot.send_message(chat_id=42, text="three")  # the slot was given back
    assert tg.texts() == ["three"]


# -- lifecycle --------------------------------------------------------------------------------


async def test_shutdown_then_initialize_again_works(tg: FakeTelegram) -> None:
    request = AiohttpRequest()
    url = f"{tg.base_url}/bot{tg.token}/getMe"
    for _ in range(3):
        await request.initialize()
        assert (await request.post(url))["username"] == tg.bot_username  # type: ignore[call-overload]
        await request.shutdown()
        with pytest.raises(NetworkError, match="not initialized"):  # PTB wraps the RuntimeError
            await request.post(url)
    await request.shutdown()  # twice is fine

    bot = make_bot(tg)
    for _ in range(3):
        await bot.initialize()
        await bot.send_message(chat_id=42, text="hi")
        await bot.shutdown()
    assert len(tg.sent) == 3


async def test_a_request_before_initialize_opens_the_session(tg: FakeTelegram) -> None:
    request = AiohttpRequest()
    try:
        result = await request.post(f"{tg.base_url}/bot{tg.token}/getMe")
        assert result["username"] == tg.bot_username  # type: ignore[call-overload]
    finally:
        await request.shutdown()


def test_http2_is_refused() -> None:
    with pytest.raises(ValueError, match=r"1\.1"):
        AiohttpRequest(http_version="2")


# -- proxies ----------------------------------------------------------------------------------


@asynccontextmanager
async def http_proxy() -> AsyncIterator[tuple[str, list[str]]]:
    """An HTTP proxy that answers every request itself; yields its URL and the request lines."""
    seen: list[str] = []
    body = b'{"ok": true, "result": {"id": 1, "is_bot": true, "first_name": "P"}}'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader)
        seen.append(head.split(b"\r\n", 1)[0].decode())
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        writer.write(b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

    async with raw_server(answer) as url:
        yield url, seen


async def test_an_explicit_proxy_carries_the_request() -> None:
    target = "http://telegram.invalid/botX/getMe"
    async with http_proxy() as (proxy, seen), AiohttpRequest(proxy=proxy) as request:
        assert (await request.post(target))["first_name"] == "P"  # type: ignore[call-overload]
    assert seen == [f"POST {target} HTTP/1.1"]


async def test_the_environment_proxy_applies_as_with_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = "http://telegram.invalid/botX/getMe"
    async with http_proxy() as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        for request_class in CLASSES:
            async with request_class() as request:  # type: ignore[abstract]
                await request.post(target)
        assert seen == [f"POST {target} HTTP/1.1"] * 2

        monkeypatch.setenv("NO_PROXY", "telegram.invalid")
        async with AiohttpRequest() as request:
            with pytest.raises(NetworkError):  # straight to telegram.invalid: no such host
                await request.post(target)
        assert len(seen) == 2
