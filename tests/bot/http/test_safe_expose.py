"""Safe to expose: who may use the web chat, bounded request bodies and WebSocket messages,
per-sender rate limits, and secrets masked in log lines.

The web chat is served by a real uvicorn on 127.0.0.1 (``tests/fakes/loopback.py``) and driven
with httpx and websockets; ``server.host`` in the config is what decides the access mode.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
import websockets
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http.server import WEB_COOKIE, create_app
from bot.http.web_auth import is_loopback
from bot.logging_setup import configure_logging
from bot.pipeline.sender_limits import MemorySenderLimiter
from bot.redaction import MASK, redact, register_secrets
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.loopback import LoopbackServer

TOKEN = "web-token-5f2c9a71"


@asynccontextmanager
async def served(tmp_path: Path, llm: FakeLLM, **sections: Any) -> AsyncIterator[str]:
    async with Loopgate(make_config(tmp_path, llm, **sections)) as app:
        asgi = create_app(app, manage_lifespan=False)
        server = LoopbackServer(asgi, name="loopgate", ws="websockets-sansio")
        port = await server.start()
        try:
            yield f"127.0.0.1:{port}"
        finally:
            await server.stop()


async def chat_once(address: str, query: str = "", **kw: Any) -> dict[str, Any]:
    async with websockets.connect(f"ws://{address}/ws?user=u1{query}", **kw) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello"
        await ws.send(json.dumps({"type": "message", "text": "hi"}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if frame["type"] == "outbound" and frame["kind"] == "message":
                return frame


# --- who may use the web chat --------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
     ("10.0.0.5", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_loopback_without_a_token_stays_open(tmp_path: Path, llm: FakeLLM) -> None:
    llm.script(text("hello there"))
    async with served(tmp_path, llm) as address, httpx.AsyncClient() as http:
        page = await http.get(f"http://{address}/")
        assert page.status_code == 200 and "new WebSocket" in page.text
        assert (await chat_once(address))["text"] == "hello there"


async def test_a_public_host_without_a_token_disables_the_web_chat(
    tmp_path: Path, llm: FakeLLM
) -> None:
    with capture_logs() as logs:
        async with served(tmp_path, llm, server={"host": "0.0.0.0"}) as address:
            async with httpx.AsyncClient() as http:
                page = await http.get(f"http://{address}/")
                health = await http.get(f"http://{address}/healthz")
            with pytest.raises(websockets.InvalidStatus) as refused:
                await chat_once(address)
    assert page.status_code == 403 and "web.token" in page.text
    assert health.status_code == 200  # health checks and webhooks are unaffected
    assert refused.value.response.status_code == 403
    disabled = [log for log in logs if log["event"] == "web.disabled"]
    assert len(disabled) == 1 and "web.token" in disabled[0]["fix"]
    assert llm.chat_requests == []


async def test_web_public_allows_anonymous_use_with_a_warning(tmp_path: Path, llm: FakeLLM) -> None:
    llm.script(text("anyone may ask"))
    with capture_logs() as logs:
        async with served(tmp_path, llm, server={"host": "0.0.0.0"}, web={"public": True}) as a:
            assert (await chat_once(a))["text"] == "anyone may ask"
    assert any(log["event"] == "web.public" and log["log_level"] == "warning" for log in logs)


async def test_a_token_is_required_by_header_query_or_login_cookie(
    tmp_path: Path, llm: FakeLLM
) -> None:
    llm.script(text("one"), text("two"))
    sections: dict[str, Any] = {"server": {"host": "0.0.0.0"}, "web": {"token": TOKEN}}
    async with served(tmp_path, llm, **sections) as address:
        base = f"http://{address}"
        async with httpx.AsyncClient() as http:
            anonymous = await http.get(f"{base}/")
            assert anonymous.status_code == 401 and 'name="token"' in anonymous.text
            bearer = await http.get(f"{base}/", headers={"Authorization": f"Bearer {TOKEN}"})
            assert bearer.status_code == 200 and "new WebSocket" in bearer.text
            wrong = await http.post(f"{base}/login", data={"token": "guess"})
            assert wrong.status_code == 401 and WEB_COOKIE not in wrong.cookies
            login = await http.post(f"{base}/login", data={"token": TOKEN})
            assert login.status_code == 303
            cookie = login.cookies[WEB_COOKIE]
            assert TOKEN not in cookie  # an HMAC of it, not the secret itself
        async with httpx.AsyncClient(cookies={WEB_COOKIE: cookie}) as http:
            assert (await http.get(f"{base}/")).status_code == 200
        with pytest.raises(websockets.InvalidStatus):
            await chat_once(address)
        with pytest.raises(websockets.InvalidStatus):
            await chat_once(address, "&token=guess")
        assert (await chat_once(address, f"&token={TOKEN}"))["text"] == "one"
        cookie_header = {"Cookie": f"{WEB_COOKIE}={cookie}"}
        assert (await chat_once(address, additional_headers=cookie_header))["text"] == "two"


# --- bounded requests ------------------------------------------------------------------------


async def test_oversized_bodies_get_413_without_being_read_whole(
    tmp_path: Path, llm: FakeLLM
) -> None:
    limit = 64 * 1024
    sections: dict[str, Any] = {"server": {"max_body_bytes": limit}, "web": {"token": TOKEN}}
    async with served(tmp_path, llm, **sections) as address:
        url = f"http://{address}/login"  # a route that reads its body
        async with httpx.AsyncClient() as http:
            with capture_logs() as logs:
                declared = await http.post(url, content=b"x" * (limit + 1))

                sent = 0

                async def endless() -> AsyncIterator[bytes]:
                    nonlocal sent
                    for _ in range(10_000):  # 640 MiB if it were all read
                        sent += 64 * 1024
                        yield b"y" * (64 * 1024)

                # The server answers 413 and closes while the client is still sending: the
                # client sees the 413 or, if it is mid-write, the closed connection.
                try:
                    chunked_status = (await http.post(url, content=endless())).status_code
                except httpx.TransportError:
                    chunked_status = 413
            small = await http.post(url, content=b"{}")
    assert declared.status_code == 413 and "server.max_body_bytes" in declared.text
    assert chunked_status == 413
    assert sent < 100 * limit  # refused as soon as it passed the limit
    assert small.status_code == 401  # within the limit the route reads it (no token in it)
    too_large = [log for log in logs if log["event"] == "http.body_too_large"]
    assert len(too_large) == 2
    assert all("x" * 16 not in str(log) and "y" * 16 not in str(log) for log in logs)


async def test_an_oversized_websocket_message_closes_the_socket(
    tmp_path: Path, llm: FakeLLM
) -> None:
    limit = 4096
    async with (
        served(tmp_path, llm, server={"max_ws_message_bytes": limit}) as address,
        websockets.connect(f"ws://{address}/ws?user=big") as ws,
    ):
        await ws.recv()
        await ws.send(json.dumps({"type": "message", "text": "z" * (limit * 2)}))
        error = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert error["type"] == "error" and str(limit) in error["error"]
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert llm.chat_requests == []


# --- per-sender limits -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_limiter_allows_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = MemorySenderLimiter(per_minute=6, burst=3, clock=clock)  # one per 10 s
    verdicts = [await limiter.allow("tg:1") for _ in range(5)]
    assert [v.allowed for v in verdicts] == [True, True, True, False, False]
    assert [v.notify for v in verdicts[3:]] == [True, False]  # told once
    assert verdicts[3].retry_after == pytest.approx(10.0)
    assert (await limiter.allow("tg:2")).allowed  # per sender
    clock.now += 10
    assert (await limiter.allow("tg:1")).allowed
    assert not (await limiter.allow("tg:1")).allowed
    # No double burst at a "window" boundary: after 30 s only what refilled is allowed.
    clock.now += 30
    assert [(await limiter.allow("tg:1")).allowed for _ in range(4)] == [True, True, True, False]
    clock.now += 60
    refused = await limiter.allow("tg:1")
    assert refused.allowed or refused.notify  # a new minute: told again if still flooding


async def test_a_flooding_sender_is_not_run_and_told_once(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, bot={"sender_rate_limit": {"per_minute": 1, "burst": 2}})
    llm.script(delay(0.2, text("a")), text("b"))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, ChatRef("web", "flood", ChatType.DIRECT))
        with capture_logs() as logs:
            jobs = [await dm.send(f"message {i}") for i in range(5)]
        assert [job is not None for job in jobs] == [True, True, False, False, False]
        await asyncio.gather(*(j for j in jobs if j is not None))
        assert dm.texts().count(config.bot.rate_limited_reply) == 1
        assert [r.messages[-1]["content"] for r in llm.chat_requests] == ["message 0", "message 1"]
        limited = [log for log in logs if log["event"] == "inbound.rate_limited"]
        assert len(limited) == 3 and "message 2" not in str(limited)
        # An admin is exempt.
        llm.script(text("for the boss"))
        boss = await dm.send("admin here", sender="boss", admin=True)
        assert boss is not None


async def test_sender_rate_limit_off(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, bot={"sender_rate_limit": "off"})
    async with Loopgate(config) as app:
        dm = ChatDriver(app, ChatRef("web", "many", ChatType.DIRECT))
        jobs = [await dm.send(f"m{i}") for i in range(8)]
        assert all(job is not None for job in jobs)
        await asyncio.gather(*(j for j in jobs if j is not None))


# --- secrets masked in log lines ---------------------------------------------------------------


@pytest.fixture
def restore_logging() -> Iterator[None]:
    yield
    logging.basicConfig(force=True)
    structlog.reset_defaults()


def test_redact_masks_registered_secrets_and_token_queries() -> None:
    register_secrets(["123456:AAbbCCddEEff-secret", "abc"])  # too short to be masked
    line = "GET /bot123456:AAbbCCddEEff-secret/getMe?x=1&token=hunter22&y=2 from abc"
    assert redact(line) == f"GET /bot{MASK}/getMe?x=1&token={MASK}&y=2 from abc"


async def test_configured_secrets_never_reach_the_log(
    tmp_path: Path, llm: FakeLLM, restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("debug", "console")  # here: stdlib's handler binds the current stderr
    secret_key = "sk-test-9d8c7b6a5f4e"
    config = make_config(tmp_path, llm, web={"token": TOKEN})
    config.providers.openai.api_key = secret_key
    llm.script(text("ok"))
    async with Loopgate(config) as app:
        structlog.get_logger("test").info("leak.attempt", key=secret_key, token=TOKEN)
        # As uvicorn's access log would print it (a library logging through stdlib).
        logging.getLogger("access.test").warning('"GET /ws?token=%s HTTP/1.1" 101', TOKEN)
        await ChatDriver(app, ChatRef("web", "s", ChatType.DIRECT)).ask("hi")
    output = capsys.readouterr().err
    assert "leak.attempt" in output and f"/ws?token={MASK}" in output
    assert secret_key not in output and TOKEN not in output
