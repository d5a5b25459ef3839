"""A platform that is down at start-up: the service starts anyway and the channel catches up;
a token that can never work still stops start-up with a clear error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http.server import create_app
from bot.platforms.startup import ChannelStarter
from channels import Forbidden
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.inbound_support import Handler, running_telegram, running_zalo
from tests.telegram_support import tg_config
from tests.waiting import wait_until


def loopgate(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **telegram: object) -> Loopgate:
    app = Loopgate(tg_config(tmp_path, llm, tg, **telegram))
    app.channel_starter = ChannelStarter(initial_delay=0.2, max_delay=0.4)
    return app


async def health(app: Loopgate) -> dict[str, object]:
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:
        response = await http.get("/healthz")
    assert response.status_code == 200
    body: dict[str, object] = response.json()
    return body


async def until_up(app: Loopgate, name: str) -> None:
    await wait_until(lambda: app.channel_starter.is_up(name), 10)


async def test_telegram_down_at_start_is_retried_while_the_rest_serves(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail_next("getMe", 502, count=2)
    with capture_logs() as logs:
        async with loopgate(tmp_path, llm, tg) as app:
            body = await health(app)
            assert body["status"] == "degraded"
            assert body["channels"] == {"web": "up", "cli": "up", "telegram": "retrying"}
            await until_up(app, "telegram")
            assert (await health(app))["status"] == "ok"

            tg.push(tg.private_message("are you there?"))
            await tg.wait_for(lambda: tg.sent)
    assert tg.sent[0]["text"] == "echo: are you there?"
    failures = [e for e in logs if e["event"] == "channel.start_failed"]
    assert len(failures) == 2 and all(e["channel"] == "telegram" for e in failures)
    assert any(e["event"] == "channel.started_after_retry" for e in logs)
    assert all(tg.token not in str(e) for e in logs)  # never log the token


async def test_webhooks_get_503_until_the_channel_is_up(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail_next("getMe", 502, count=100)
    app = loopgate(
        tmp_path,
        llm,
        tg,
        mode="webhook",
        webhook_url="https://bot.example/telegram/webhook",
        webhook_secret="s3cret",
    )
    async with app:
        transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:
            response = await http.post(
                "/telegram/webhook",
                json={"update_id": 1, **tg.private_message("hi")},
                headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret"},
            )
        assert response.status_code == 503  # Telegram keeps the update and retries
    assert tg.sent == [] and llm.chat_requests == []


async def test_a_refused_token_stops_start_up(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail_next("getMe", 401, "Unauthorized")
    app = loopgate(tmp_path, llm, tg)
    with pytest.raises(Forbidden, match=r"channels\.telegram\.token") as info:
        await app.start()
    assert tg.token not in str(info.value) and info.value.__cause__ is None
    assert len(tg.calls_of("getMe")) == 1  # not retried


async def test_shutdown_cancels_a_pending_retry(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail_next("getMe", 502, count=100)
    async with loopgate(tmp_path, llm, tg) as app:
        await wait_until(lambda: app.channel_starter.states["telegram"] == "retrying", 5)
        assert app.channel_starter.states["telegram"] == "retrying"
    calls = len(tg.calls_of("getMe"))
    await asyncio.sleep(0.6)  # kept (negative check)
    assert len(tg.calls_of("getMe")) == calls  # nothing left retrying after shutdown


# -- a start-up call that fails in an unexpected way (issue 11, point 6) -----------------------


async def test_telegram_delete_webhook_refused_still_polls(tg: FakeTelegram) -> None:
    tg.fail_next("deleteWebhook", 400, "Bad Request: something unexpected")
    handler = Handler()
    with capture_logs() as logs:
        async with running_telegram(tg, handler):
            tg.push(tg.private_message("anyone there?"))
            await handler.wait_for(lambda: handler.taken)
    assert handler.texts() == ["anyone there?"]
    assert any(e["event"] == "telegram.delete_webhook_failed" for e in logs)


async def test_zalo_webhook_check_refused_still_polls(zalo: FakeZalo) -> None:
    zalo.fail("getWebhookInfo", 400, description="unexpected")
    handler = Handler()
    zalo.push(text_event("anyone there?", chat_id="u1"))
    with capture_logs() as logs:
        async with running_zalo(zalo, handler):
            await handler.wait_for(lambda: handler.taken)
    assert handler.texts() == ["anyone there?"]
    assert len(zalo.calls("getWebhookInfo")) == 1  # a 400 is not retried
    skipped = [e for e in logs if e["event"] == "zalo.setup_step_skipped"]
    assert skipped and skipped[0]["method"] == "deleteWebhook"


async def test_zalo_set_webhook_refused_is_logged_once_not_spun(zalo: FakeZalo) -> None:
    zalo.fail("setWebhook", 400, description="url is not https")
    with capture_logs() as logs:
        async with running_zalo(zalo, Handler(), mode="webhook") as channel:
            runner = channel._runner
            assert runner is not None
            await asyncio.wait_for(runner, 5)  # set-up ended instead of retrying a 400
    assert len(zalo.calls("setWebhook")) == 1
    skipped = [e for e in logs if e["event"] == "zalo.setup_step_skipped"]
    assert skipped and skipped[0]["method"] == "setWebhook"
