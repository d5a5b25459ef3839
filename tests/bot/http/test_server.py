"""The HTTP server's own routes (``bot/http/server.py``): the web chat's WebSocket (hello,
frames in and out, bad frames, a refused message), the webhook catch-all, the login routes
without a token, and who starts and stops Loopgate with the app's lifespan."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from bot.app import Loopgate
from bot.http.server import _parse_client_message, create_app
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.loopback import LoopbackServer
from tests.telegram_support import FakeTelegram, telegram_section
from tests.waiting import wait_until

Frame = dict[str, Any]


@asynccontextmanager
async def served(app: Loopgate) -> AsyncIterator[str]:
    server = LoopbackServer(
        create_app(app, manage_lifespan=False), name="loopgate", ws="websockets-sansio"
    )
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop()


async def frames_until(ws: Any, done: Any, timeout: float = 10) -> list[Frame]:
    seen: list[Frame] = []
    while not seen or not done(seen[-1]):
        seen.append(json.loads(await asyncio.wait_for(ws.recv(), timeout)))
    return seen


def a_reply(frame: Frame) -> bool:
    return frame["type"] == "outbound" and frame["kind"] == "message"


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"type": "message", "text": "hi"}', "hi"),
        ('{"type": "message", "text": ""}', ""),
        ("not json", None),
        ('["message", "hi"]', None),
        ('{"type": "typing", "text": "hi"}', None),
        ('{"type": "message"}', None),
        ('{"type": "message", "text": 5}', None),
    ],
)
def test_parse_client_message(raw: str, parsed: str | None) -> None:
    assert _parse_client_message(raw) == parsed


class TestChatSocket:
    async def test_hello_then_events_and_the_reply(self, app: Loopgate) -> None:
        async with (
            served(app) as address,
            websockets.connect(f"ws://{address}/ws?user=%20tab-1%20") as ws,
        ):
            hello = json.loads(await ws.recv())
            assert hello == {
                "type": "hello",
                "user": "tab-1",  # trimmed
                "session_key": "agent:main:web:direct:tab-1",
            }
            await ws.send(json.dumps({"type": "message", "text": "hello"}))
            seen = await frames_until(ws, a_reply)
        assert seen[-1]["text"] == "echo: hello"
        events = [f["event"]["type"] for f in seen if f["type"] == "event"]
        assert events[0] == "run.started" and "run.completed" in events
        assert all(
            f["event"]["session_key"] == hello["session_key"] for f in seen if f["type"] == "event"
        )

    async def test_a_tab_without_a_user_gets_one_and_long_ids_are_cut(self, app: Loopgate) -> None:
        users = []
        async with served(app) as address:
            for query in ("", "", f"?user={'x' * 100}"):
                async with websockets.connect(f"ws://{address}/ws{query}") as ws:
                    users.append(json.loads(await ws.recv())["user"])
        first, second, long = users
        assert len(first) == 32 and first != second
        assert long == "x" * 64

    async def test_a_bad_frame_is_answered_and_the_socket_stays(
        self, app: Loopgate, llm: FakeLLM
    ) -> None:
        async with served(app) as address, websockets.connect(f"ws://{address}/ws?user=u") as ws:
            await ws.recv()
            await ws.send('{"type": "message", "text": 3}')
            error = json.loads(await ws.recv())
            assert error == {
                "type": "error",
                "error": 'expected {"type": "message", "text": ...}',
            }
            await ws.send(json.dumps({"type": "message", "text": "still here"}))
            seen = await frames_until(ws, a_reply)
        assert seen[-1]["text"] == "echo: still here"
        assert len(llm.chat_requests) == 1

    async def test_a_message_not_stored_says_send_it_again(
        self, app: Loopgate, llm: FakeLLM
    ) -> None:
        async with served(app) as address, websockets.connect(f"ws://{address}/ws?user=u") as ws:
            await ws.recv()
            app.gateway.stop_accepting()  # as at shutdown: messages are no longer stored
            await ws.send(json.dumps({"type": "message", "text": "late"}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 10))
            app.gateway.accepting = True
        assert error["type"] == "error"
        assert error["error"].startswith("not accepted (") and error["error"].endswith(
            "send it again"
        )
        assert llm.chat_requests == []

    async def test_events_of_other_tabs_are_not_sent(self, app: Loopgate, llm: FakeLLM) -> None:
        llm.script(delay(0.2, text("for a")))
        async with (
            served(app) as address,
            websockets.connect(f"ws://{address}/ws?user=a") as tab_a,
            websockets.connect(f"ws://{address}/ws?user=b") as tab_b,
        ):
            await tab_a.recv()
            await tab_b.recv()
            await tab_a.send(json.dumps({"type": "message", "text": "hi"}))
            await frames_until(tab_a, a_reply)
            await tab_b.send(json.dumps({"type": "message", "text": "me too"}))
            seen_b = await frames_until(tab_b, a_reply)
        assert [
            f["text"] for f in seen_b if f["type"] == "outbound" and f["kind"] == "message"
        ] == ["echo: me too"]
        keys = {f["event"]["session_key"] for f in seen_b if f["type"] == "event"}
        assert keys == {"agent:main:web:direct:b"}


async def client_of(app: Loopgate) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    return httpx.AsyncClient(transport=transport, base_url="http://bot")


class TestRoutes:
    async def test_a_post_nobody_claims_is_404(self, app: Loopgate) -> None:
        async with await client_of(app) as http:
            response = await http.post("/telegram/webhook", json={})
        assert response.status_code == 404
        assert response.json() == {"error": "no enabled channel receives webhooks here"}

    async def test_login_routes_without_a_token(self, app: Loopgate) -> None:
        async with await client_of(app) as http:
            form = await http.get("/login")
            assert form.status_code == 303 and form.headers["location"] == "/"
            posted = await http.post("/login", data={"token": "x"})
            assert posted.status_code == 404
            assert posted.json() == {"error": "no login needed here"}
            page = await http.get("/")
            assert page.status_code == 200 and "<html" in page.text.lower()

    async def test_a_webhook_after_the_drain_is_503_and_not_stored(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        """During the drain webhooks are still taken (tests/e2e/test_telegram.py); once it is
        over, the channel's intake is closed and the platform must deliver again elsewhere."""
        section = telegram_section(
            tg,
            mode="webhook",
            webhook_url="https://bot.example/telegram/webhook",
            webhook_secret="s3cret",
        )
        config = make_config(tmp_path, llm, channels={"telegram": section})
        async with Loopgate(config) as app, await client_of(app) as http:
            await wait_until(lambda: app.channel_starter.is_up("telegram"))
            assert await app.drain(grace=0) == 0
            update = {"update_id": 1, **tg.private_message("hi")}
            headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
            refused = await http.post("/telegram/webhook", json=update, headers=headers)
            assert refused.status_code == 503
            assert app.inbox is not None
            assert await app.inbox.counts() == {"queued": 0, "running": 0}
        assert tg.sent == [] and llm.chat_requests == []


class TestLifespan:
    async def test_the_app_starts_and_stops_loopgate(self, tmp_path: Path, llm: FakeLLM) -> None:
        loopgate = Loopgate(make_config(tmp_path, llm))
        asgi = create_app(loopgate)
        async with asgi.router.lifespan_context(asgi):
            assert loopgate.gateway.accepting  # started by the app
            async with await client_of(loopgate) as http:
                assert (await http.get("/healthz")).status_code == 200
        assert not loopgate.gateway.accepting  # and closed with it

    async def test_a_started_loopgate_is_only_closed(self, tmp_path: Path, llm: FakeLLM) -> None:
        loopgate = Loopgate(make_config(tmp_path, llm))
        await loopgate.start()
        gateway = loopgate.gateway
        asgi = create_app(loopgate, started=True)
        async with asgi.router.lifespan_context(asgi):
            assert loopgate.gateway is gateway  # not started a second time
            assert gateway.accepting
        assert not gateway.accepting

    async def test_without_lifespan_the_caller_owns_loopgate(self, app: Loopgate) -> None:
        asgi = create_app(app, manage_lifespan=False)
        async with asgi.router.lifespan_context(asgi):
            pass
        assert app.gateway.accepting  # the fixture closes it, not the app
