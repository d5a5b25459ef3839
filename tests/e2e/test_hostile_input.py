"""Bad input gets a clear answer and loses nothing: malformed webhook bodies, a 100 KB message,
a NUL byte. Through the real HTTP routes and the real platform clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from structlog.testing import capture_logs

from agent_core.settings import MAX_MESSAGE_CHARS
from bot.app import Loopgate
from bot.http.server import create_app
from bot.storage.models import MessageRow
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event

HUGE = "a\x00b " + "x" * 100_000  # a NUL byte and about 100 KB
SECRET = "s3cret-token"
MALFORMED = [b"not json", b"[]", b"null", b'{"update_id": "seven"}', b"\xff\xfe"]


async def stored_texts(app: Loopgate) -> list[str]:
    rows = await app.db.run_read(lambda conn: conn.execute(select(MessageRow.content)).all())
    return [r.content or "" for r in rows]


def assert_model_got_truncated(llm: FakeLLM) -> None:
    [request] = llm.chat_requests
    content = request.json["messages"][-1]["content"]
    assert content.startswith("a")
    assert f"truncated to {MAX_MESSAGE_CHARS}" in content
    assert MAX_MESSAGE_CHARS < len(content) < MAX_MESSAGE_CHARS + 200


class TestWebChat:
    async def test_a_100kb_message_with_a_nul_byte_is_answered_and_stored(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        result = await dm.ask(HUGE)
        assert result is not None and result.status.value == "completed"
        assert dm.texts()  # the user got an answer
        assert_model_got_truncated(llm)
        stored = await stored_texts(app)
        assert stored and "\x00" not in "".join(stored)  # Postgres could not hold it


class TestTelegramWebhook:
    @pytest.fixture
    async def hooked(
        self, tmp_path: Path, llm: FakeLLM
    ) -> AsyncIterator[tuple[FakeTelegram, httpx.AsyncClient]]:
        async with FakeTelegram() as tg:
            telegram = {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.base_url,
                "mode": "webhook",
                "webhook_url": "https://bot.example/telegram/webhook",
                "webhook_secret": SECRET,
                "rate_limit": "off",
            }
            config = make_config(tmp_path, llm, channels={"telegram": telegram})
            async with Loopgate(config) as app:
                transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
                async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:
                    yield tg, http

    async def post(self, http: httpx.AsyncClient, body: bytes) -> httpx.Response:
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "content-type": "application/json"}
        return await http.post("/telegram/webhook", content=body, headers=headers)

    @pytest.mark.parametrize("body", MALFORMED)
    async def test_malformed_bodies_are_refused_clearly(
        self,
        hooked: tuple[FakeTelegram, httpx.AsyncClient],
        llm: FakeLLM,
        body: bytes,
    ) -> None:
        tg, http = hooked
        response = await self.post(http, body)
        assert response.status_code == 400 and "error" in response.json()
        await asyncio.sleep(0.1)  # kept (negative check)
        assert tg.sent == [] and llm.chat_requests == []

    async def test_an_update_missing_fields_is_acked_logged_and_the_next_one_answered(
        self, hooked: tuple[FakeTelegram, httpx.AsyncClient], llm: FakeLLM
    ) -> None:
        tg, http = hooked
        with capture_logs() as logs:
            # Acknowledged: a 4xx would make Telegram redeliver the same broken update forever.
            broken = await self.post(http, b'{"update_id": 70, "message": {"text": "hi"}}')
            assert broken.status_code == 200
            update = {"update_id": 71, **tg.private_message(HUGE)}
            ok = await http.post(
                "/telegram/webhook",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            )
            assert ok.status_code == 200
            await tg.wait_for(lambda: tg.sent)
        assert any(e["event"] == "telegram.bad_update" for e in logs)
        assert_model_got_truncated(llm)


class TestZaloWebhook:
    @pytest.fixture
    async def hooked(
        self, tmp_path: Path, llm: FakeLLM
    ) -> AsyncIterator[tuple[FakeZalo, httpx.AsyncClient]]:
        async with FakeZalo("123:zalo-token") as zalo:
            section: dict[str, Any] = {
                "enabled": True,
                "token": "123:zalo-token",
                "api_base_url": zalo.base_url,
                "mode": "webhook",
                "webhook_url": "https://bot.example/zalo/webhook",
                "webhook_secret": SECRET,
            }
            config = make_config(tmp_path, llm, channels={"zalo": section})
            async with Loopgate(config) as app:
                transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
                await zalo.wait_for(lambda: zalo.calls("setWebhook"))
                async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:
                    yield zalo, http

    @pytest.mark.parametrize("body", MALFORMED)
    async def test_malformed_bodies_are_refused_or_logged_and_run_nothing(
        self, hooked: tuple[FakeZalo, httpx.AsyncClient], llm: FakeLLM, body: bytes
    ) -> None:
        zalo, http = hooked
        headers = {"X-Bot-Api-Secret-Token": SECRET, "content-type": "application/json"}
        with capture_logs() as logs:
            response = await http.post("/zalo/webhook", content=body, headers=headers)
        if body in (b"not json", b"\xff\xfe"):
            assert response.status_code == 400
            assert response.json()["description"] == "invalid JSON"
        else:  # JSON of a shape we don't know: acknowledged (no redelivery loop) and logged
            assert response.status_code == 200
            assert [e["event"] for e in logs] == ["zalo.webhook_unrecognized"]
        await asyncio.sleep(0.1)  # kept (negative check)
        assert zalo.messages == [] and llm.chat_requests == []

    async def test_a_100kb_message_with_a_nul_byte_is_answered(
        self, hooked: tuple[FakeZalo, httpx.AsyncClient], llm: FakeLLM
    ) -> None:
        zalo, http = hooked
        headers = {"X-Bot-Api-Secret-Token": SECRET}
        payload = text_event(HUGE, chat_id="u1")
        response = await http.post("/zalo/webhook", json=payload, headers=headers)
        assert response.status_code == 200
        await zalo.wait_for(lambda: zalo.messages)
        assert_model_got_truncated(llm)
        assert all(len(t) <= 2000 for t in zalo.texts())
