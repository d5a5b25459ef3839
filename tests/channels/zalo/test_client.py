"""The Zalo Bot API client against the real-HTTP fake: shapes, errors, retry safety."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from channels import BadRequest, RetryAfter
from channels.zalo import (
    ZaloBotClient,
    ZaloPollIdle,
    ZaloServerError,
    ZaloTokenInvalid,
    parse_update,
    parse_updates,
)
from tests.fakes.zalo_server import DEFAULT_TOKEN, FakeZalo, image_event, text_event

TOKEN = DEFAULT_TOKEN  # the fixture's fake server (tests/zalo_support.py)


@pytest.fixture
async def client(zalo: FakeZalo) -> AsyncIterator[ZaloBotClient]:
    c = ZaloBotClient(TOKEN, base_url=zalo.base_url, backoff_initial=0.01, backoff_max=0.05)
    yield c
    await c.aclose()


class TestParsing:
    def test_bare_and_wrapped_events_parse_the_same(self) -> None:
        bare = text_event("xin chào", chat_id="c1", message_id="m1")
        wrapped = {"ok": True, "result": bare}
        for payload in (bare, wrapped):
            update = parse_update(payload)
            assert update is not None and update.message is not None
            assert update.event_name == "message.text.received"
            assert (update.message.chat_id, update.message.message_id) == ("c1", "m1")
            assert update.message.text == "xin chào"
            assert update.message.sender.display_name == "Lan"

    def test_one_object_a_list_or_nothing(self) -> None:
        one = text_event("a")
        assert len(parse_updates(one)) == 1
        assert len(parse_updates([one, text_event("b")])) == 2
        assert parse_updates(None) == [] and parse_updates({}) == []

    def test_numeric_ids_and_garbage_are_tolerated(self) -> None:
        update = parse_update(
            {
                "event_name": "message.text.received",
                "message": {"from": {"id": 7}, "chat": {"id": 9}},
            }
        )
        assert update is not None and update.message is not None
        assert update.message.chat_id == "9" and update.message.sender.id == "7"
        assert parse_update({"event_name": "x", "message": "nope"}) is not None  # no message
        assert parse_update(["not", "an", "event"]) is None


class TestCalls:
    async def test_get_me(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        me = await client.get_me()
        assert me.id == "bot-1" and me.account_name == "bot.loopgate"
        assert zalo.calls("getMe")[0].token == TOKEN

    @pytest.mark.parametrize("shape", ["object", "list"])
    async def test_get_updates_both_shapes(
        self, client: ZaloBotClient, zalo: FakeZalo, shape: str
    ) -> None:
        zalo.updates_shape = shape  # type: ignore[assignment]
        zalo.push(text_event("one"), image_event("https://img/1.jpg"))
        first = await client.get_updates(5)
        expected = 1 if shape == "object" else 2
        assert len(first) == expected
        assert zalo.calls("getUpdates")[0].json == {"timeout": "5"}

    async def test_idle_poll_is_408(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        with pytest.raises(ZaloPollIdle):
            await client.get_updates(1)
        assert zalo.calls("getUpdates")[0].status == 408

    async def test_bad_token_is_not_retried_and_not_leaked(
        self, client: ZaloBotClient, zalo: FakeZalo
    ) -> None:
        zalo.invalid_token = True
        with pytest.raises(ZaloTokenInvalid) as info:
            await client.get_me()
        assert len(zalo.calls("getMe")) == 1
        assert TOKEN not in str(info.value) and "fake-token" not in str(info.value)

    async def test_send_message_retries_503_once_delivered(
        self, client: ZaloBotClient, zalo: FakeZalo
    ) -> None:
        zalo.fail("sendMessage", 503, times=2)
        sent = await client.send_message("c1", "hello")
        assert sent.message_id.startswith("out-")
        assert len(zalo.calls("sendMessage")) == 3
        assert zalo.texts() == ["hello"]

    async def test_send_message_500_is_not_resent(
        self, client: ZaloBotClient, zalo: FakeZalo
    ) -> None:
        # A 500 may come after the message went out: resending could duplicate it.
        zalo.fail("sendMessage", 500, delivered=True)
        with pytest.raises(ZaloServerError):
            await client.send_message("c1", "hello")
        assert len(zalo.calls("sendMessage")) == 1
        assert zalo.texts() == ["hello"]

    async def test_429_waits_and_retries(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        zalo.fail("sendMessage", 429, retry_after=0.05)
        await client.send_message("c1", "hi")
        calls = zalo.calls("sendMessage")
        assert [c.status for c in calls] == [429, 200]
        assert calls[1].at - calls[0].at >= 0.04
        assert zalo.texts() == ["hi"]

    async def test_429_exhausted_raises_retry_after(
        self, client: ZaloBotClient, zalo: FakeZalo
    ) -> None:
        zalo.fail("sendMessage", 429, times=3, retry_after=0.01)
        with pytest.raises(RetryAfter):
            await client.send_message("c1", "hi")
        assert zalo.texts() == []

    async def test_typing_is_retried_on_500(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        zalo.fail("sendChatAction", 500)
        await client.send_chat_action("c1")
        assert [c.json for c in zalo.calls("sendChatAction")] == [
            {"chat_id": "c1", "action": "typing"}
        ] * 2

    async def test_other_methods(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        info = await client.set_webhook("https://example.com/zalo/webhook", "secret-123")
        assert info.url == "https://example.com/zalo/webhook"
        assert zalo.calls("setWebhook")[0].json == {
            "url": "https://example.com/zalo/webhook",
            "secret_token": "secret-123",
        }
        assert (await client.get_webhook_info()).url == info.url
        assert (await client.delete_webhook()).url == ""
        photo = await client.send_photo("c1", "https://img/x.png", caption="look")
        assert photo.message_id
        assert zalo.calls("sendPhoto")[0].json == {
            "chat_id": "c1",
            "photo": "https://img/x.png",
            "caption": "look",
        }

    async def test_refusal_is_bad_request(self, client: ZaloBotClient, zalo: FakeZalo) -> None:
        zalo.fail("sendMessage", 400, description="chat not found")
        with pytest.raises(BadRequest, match="chat not found"):
            await client.send_message("c1", "x")
        with pytest.raises(ValueError):
            await client.send_message("c1", "x" * 2001)


class TestConfig:
    def test_webhook_secret_length_is_checked_with_its_key_path(self) -> None:
        from bot.config import ConfigFileError, parse_config

        zalo = {"enabled": True, "token": "t", "mode": "webhook", "webhook_url": "https://x/y"}
        with pytest.raises(ConfigFileError, match=r"channels\.zalo\.webhook_secret: .*8 to 256"):
            parse_config({"channels": {"zalo": {**zalo, "webhook_secret": "short"}}}, {})
        config = parse_config({"channels": {"zalo": {**zalo, "webhook_secret": "long-enough"}}}, {})
        assert config.channels.zalo.polling_timeout == 30
        assert config.channels.zalo.group_delivery == "all"
