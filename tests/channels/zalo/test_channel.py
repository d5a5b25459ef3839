"""The Zalo adapter on its own against the fake Zalo Bot API: what a message becomes, the
webhook's answers, the poller's hand-over and back-off, and sending."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from channels import Attachment, ChatRef, ChatType, MessageRef
from channels.zalo import ZaloBotClient, ZaloChannel, ZaloSettings
from channels.zalo._channel import (
    CAPABILITIES,
    MAX_WEBHOOK_BODY,
    SECRET_HEADER,
    content_text,
    photo_attachments,
)
from channels.zalo._types import ZaloEvent, ZaloMessage, ZaloUser
from tests.fakes.zalo_server import FakeZalo, image_event, text_event
from tests.inbound_support import ZALO_SECRET, Handler, MemorySeen, running_zalo, webhook_client


def message(**fields: Any) -> ZaloMessage:
    return replace(ZaloMessage("m1", "u1", "PRIVATE", ZaloUser("u1")), **fields)


@asynccontextmanager
async def webhook_channel(
    zalo: FakeZalo, handler: Handler, **settings: Any
) -> AsyncIterator[tuple[ZaloChannel, httpx.AsyncClient]]:
    client = ZaloBotClient(zalo.token, base_url=zalo.base_url, backoff_initial=0.01)
    channel = ZaloChannel(
        client,
        ZaloSettings(
            mode="webhook",
            webhook_url="https://bot.example/zalo/webhook",
            webhook_secret=ZALO_SECRET,
            backoff_initial=0.02,
            backoff_max=0.2,
            **settings,
        ),
        MemorySeen(),
    )
    await channel.start(handler)
    await zalo.wait_for(lambda: zalo.webhook["url"])  # set up, and getMe answered before it
    http = webhook_client(channel.webhook_path, channel.handle_webhook)
    try:
        yield channel, http
    finally:
        await http.aclose()
        await channel.stop()


async def deliver(
    channel: ZaloChannel, http: httpx.AsyncClient, payload: Any, *, secret: str | None = ZALO_SECRET
) -> httpx.Response:
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    if isinstance(payload, bytes):
        return await http.post(channel.webhook_path, content=payload, headers=headers)
    return await http.post(channel.webhook_path, json=payload, headers=headers)


def group(text: str, **kw: Any) -> dict[str, Any]:
    return text_event(text, chat_id="g1", sender_id="u7", chat_type="GROUP", **kw)


class TestContentText:
    def test_text_is_itself(self) -> None:
        assert content_text(ZaloEvent.TEXT, message(text="xin chào")) == "xin chào"
        assert content_text(ZaloEvent.TEXT, message()) == ""

    def test_an_image_is_its_caption_and_its_photo_an_attachment(self) -> None:
        photo = message(photo="https://x/p.jpg", caption="look")
        assert content_text(ZaloEvent.IMAGE, photo) == "look"
        assert photo_attachments(ZaloEvent.IMAGE, photo, "m1") == (
            Attachment("image", "https://x/p.jpg", "photo_m1.jpg", "image/jpeg"),
        )
        # Without a caption the text (some clients put it there) is the caption.
        assert content_text(ZaloEvent.IMAGE, message(photo="https://x/p", text="t")) == "t"

    def test_an_image_without_a_usable_link_stays_a_note(self) -> None:
        bare = content_text(ZaloEvent.IMAGE, message())
        assert bare == "[The user sent an image. You can't see images here.]"
        assert content_text(ZaloEvent.IMAGE, message(text="as text")).endswith("\nas text")
        assert photo_attachments(ZaloEvent.IMAGE, message(), "m1") == ()
        odd = message(photo="file:///etc/passwd")
        assert photo_attachments(ZaloEvent.IMAGE, odd, "m1") == ()
        assert photo_attachments(ZaloEvent.TEXT, message(photo="https://x/p"), "m1") == ()

    def test_stickers_voice_and_unsupported_content_are_notes(self) -> None:
        assert content_text(ZaloEvent.STICKER, message(url="https://s/1")) == (
            "[The user sent a sticker (https://s/1).]"
        )
        assert content_text(ZaloEvent.STICKER, message()) == "[The user sent a sticker.]"
        assert "voice message" in content_text(ZaloEvent.VOICE, message())
        assert "ask them to write it as text" in content_text(ZaloEvent.UNSUPPORTED, message())

    def test_an_unknown_kind_is_named(self) -> None:
        assert content_text("message.video.received", message()) == (
            "[The user sent a kind of message this bot can't read (video).]"
        )
        assert "(odd.event)" in content_text("odd.event", message())


def test_backoff_doubles_up_to_its_cap() -> None:
    client = ZaloBotClient("t:x", base_url="http://127.0.0.1:9")
    channel = ZaloChannel(client, ZaloSettings(backoff_initial=0.5, backoff_max=3.0), MemorySeen())
    assert [channel.backoff_delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert channel.backoff_delay(10_000) == 3.0  # no overflow


def test_the_channel_says_what_zalo_cannot_do() -> None:
    assert (CAPABILITIES.reactions, CAPABILITIES.edits, CAPABILITIES.threads) == (
        False,
        False,
        False,
    )
    assert (CAPABILITIES.max_chars, CAPABILITIES.formatting) == (2000, "plain")


class TestWhatAMessageBecomes:
    async def test_a_private_message_is_addressed(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler) as (channel, http):
            payload = text_event("xin chào", chat_id="u1", name="Lan", message_id="m-1")
            assert (await deliver(channel, http, payload)).status_code == 200
        [msg] = handler.taken
        assert msg.chat == ChatRef("zalo", "u1", ChatType.DIRECT)
        assert (msg.message_id, msg.text, msg.addressed) == ("m-1", "xin chào", True)
        assert (msg.sender.id, msg.sender.name) == ("u1", "Lan")
        date = payload["message"]["date"]
        assert msg.received_at == datetime.fromtimestamp(date / 1000, UTC)
        assert msg.metadata == {
            "event_name": "message.text.received",
            "bot_username": "bot.loopgate",
        }

    async def test_in_a_group_only_a_mention_or_a_reply_addresses_the_bot(
        self, zalo: FakeZalo
    ) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler, mention_names=("Loopy",)) as (channel, http):
            for payload in (
                group("just chatting"),
                group("@bot.loopgate /stop"),
                group("hey @loopy, help"),
                group("by id", mentions=[{"id": "bot-1"}]),
                group("thanks", reply_to_message={"from": {"id": "bot-1"}}),
                group("emails like x@loopy.com do not count"),
            ):
                assert (await deliver(channel, http, payload)).status_code == 200
        assert [(m.text, m.addressed) for m in handler.taken] == [
            ("just chatting", False),
            ("/stop", True),  # a leading mention is removed, so commands work
            ("hey @loopy, help", True),
            ("by id", True),
            ("thanks", True),
            ("emails like x@loopy.com do not count", False),
        ]
        assert all(m.chat.chat_type is ChatType.GROUP for m in handler.taken)

    async def test_with_addressed_only_delivery_every_group_message_counts(
        self, zalo: FakeZalo
    ) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler, group_delivery="addressed_only") as (ch, http):
            assert (await deliver(ch, http, group("no mention needed"))).status_code == 200
        assert [m.addressed for m in handler.taken] == [True]

    async def test_an_image_becomes_its_caption_and_a_photo_to_fetch(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler) as (channel, http):
            url = zalo.add_photo(b"jpeg bytes")
            payload = image_event(url, caption="our cat", chat_id="u1")
            assert (await deliver(channel, http, payload)).status_code == 200
            (taken,) = handler.taken
            (photo,) = taken.attachments
            fetched = await channel.fetch_file(photo)
        assert handler.texts() == ["our cat"]
        assert (photo.kind, photo.file_id) == ("image", url)
        assert fetched == b"jpeg bytes"

    async def test_bots_and_events_without_a_message_are_ignored(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler) as (channel, http):
            from_bot = text_event("I am a bot", chat_id="u1")
            from_bot["message"]["from"]["is_bot"] = True
            assert (await deliver(channel, http, from_bot)).status_code == 200
        assert handler.taken == []

    async def test_an_event_without_message_id_is_deduped_by_its_content(
        self, zalo: FakeZalo
    ) -> None:
        handler = Handler()
        payload = text_event("no id", chat_id="u1")
        del payload["message"]["message_id"]
        async with webhook_channel(zalo, handler) as (channel, http):
            assert (await deliver(channel, http, payload)).status_code == 200
            assert (await deliver(channel, http, payload)).status_code == 200
            other = text_event("no id either", chat_id="u1")
            del other["message"]["message_id"]
            assert (await deliver(channel, http, other)).status_code == 200
        assert handler.texts() == ["no id", "no id either"]
        first, second = (m.message_id for m in handler.taken)
        assert first.startswith("sha256-") and first != second


class TestWebhook:
    @pytest.mark.parametrize("secret", [None, "", "wrong"])
    async def test_a_wrong_secret_is_401(self, zalo: FakeZalo, secret: str | None) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler) as (channel, http):
            response = await deliver(channel, http, text_event("x"), secret=secret)
        assert response.status_code == 401 and handler.taken == []

    async def test_a_body_too_large_is_413(self, zalo: FakeZalo) -> None:
        async with webhook_channel(zalo, Handler()) as (channel, http):
            response = await deliver(channel, http, b"x" * (MAX_WEBHOOK_BODY + 1))
        assert response.status_code == 413

    async def test_what_is_not_json_is_400(self, zalo: FakeZalo) -> None:
        async with webhook_channel(zalo, Handler()) as (channel, http):
            assert (await deliver(channel, http, b"{not json")).status_code == 400

    async def test_an_unknown_shape_is_acknowledged_and_logged(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with webhook_channel(zalo, handler) as (channel, http):
            with capture_logs() as logs:
                response = await deliver(channel, http, {"something": "else", "n": 1})
        assert response.status_code == 200 and handler.taken == []
        [logged] = [e for e in logs if e["event"] == "zalo.webhook_unrecognized"]
        assert logged["shape"] == ["n", "something"]

    async def test_a_refused_message_is_503_and_its_redelivery_is_taken(
        self, zalo: FakeZalo
    ) -> None:
        handler = Handler(refuse=1)
        async with webhook_channel(zalo, handler) as (channel, http):
            payload = text_event("again", chat_id="u1")
            assert (await deliver(channel, http, payload)).status_code == 503
            assert (await deliver(channel, http, payload)).status_code == 200
            assert (await deliver(channel, http, payload)).status_code == 200  # a duplicate
        assert handler.texts() == ["again"]

    async def test_a_failing_handler_is_logged_and_the_message_counts(self, zalo: FakeZalo) -> None:
        handler = Handler(error=RuntimeError("boom"))
        async with webhook_channel(zalo, handler) as (channel, http):
            payload = text_event("bad", chat_id="u1")
            with capture_logs() as logs:
                assert (await deliver(channel, http, payload)).status_code == 200
            handler.error = None
            assert (await deliver(channel, http, payload)).status_code == 200
        assert any(e["event"] == "zalo.dispatch_failed" for e in logs)
        assert handler.taken == []  # the redelivery was a duplicate

    async def test_in_polling_mode_there_is_no_webhook(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with running_zalo(zalo, handler) as channel:
            assert channel.webhook_path == ""
            async with webhook_client("/zalo/webhook", channel.handle_webhook) as http:
                response = await http.post("/zalo/webhook", json=text_event("x"))
        assert response.status_code == 404


class TestPolling:
    async def test_a_refused_update_is_offered_again_before_the_next(self, zalo: FakeZalo) -> None:
        zalo.updates_shape = "list"
        handler = Handler(refuse=2)
        async with running_zalo(zalo, handler):
            zalo.push(text_event("one", chat_id="u1"), text_event("two", chat_id="u2"))
            await handler.wait_for(lambda: len(handler.taken) == 2)
        assert handler.refused_texts() == ["one", "one"]
        assert handler.texts() == ["one", "two"]

    async def test_a_set_up_step_failing_with_5xx_is_retried(self, zalo: FakeZalo) -> None:
        zalo.webhook["url"] = "https://old.example/hook"
        zalo.fail("getWebhookInfo", 502, times=2)
        handler = Handler()
        async with running_zalo(zalo, handler):
            await zalo.wait_for(lambda: zalo.calls("getUpdates"))
        assert [c.status for c in zalo.calls("getWebhookInfo")] == [502, 502, 200]
        assert zalo.calls("deleteWebhook") and zalo.webhook["url"] == ""

    async def test_a_429_waits_at_least_its_retry_after(self, zalo: FakeZalo) -> None:
        zalo.fail("getUpdates", 429, retry_after=1)
        handler = Handler()
        async with running_zalo(zalo, handler):
            await zalo.wait_for(lambda: len(zalo.calls("getUpdates")) >= 2)
        first, second = zalo.calls("getUpdates")[:2]
        assert second.at - first.at >= 0.9  # Zalo's Retry-After over our 0.02 s backoff

    async def test_an_invalid_token_is_logged_each_time_and_retried(self, zalo: FakeZalo) -> None:
        zalo.invalid_token = True
        with capture_logs() as logs:
            async with running_zalo(zalo, Handler()):
                await zalo.wait_for(lambda: len(zalo.calls("getWebhookInfo")) >= 3)
        token_errors = [e for e in logs if e["event"] == "zalo.token_invalid"]
        assert len(token_errors) >= 3
        assert all(e["fix"] == "check channels.zalo.token" for e in token_errors)


class TestOutbound:
    async def test_sending_ignores_reply_to_and_returns_zalos_id(self, zalo: FakeZalo) -> None:
        async with running_zalo(zalo, Handler()) as channel:
            chat = ChatRef("zalo", "u1", ChatType.DIRECT)
            ref = await channel.send_text(chat, "chào", reply_to="m-9")
            await channel.set_typing(chat)
        [sent] = zalo.messages
        assert sent.json == {"chat_id": "u1", "text": "chào"}
        assert ref.chat == chat and ref.message_id.startswith("out-")
        assert zalo.calls("sendChatAction")[0].json == {"chat_id": "u1", "action": "typing"}

    async def test_reactions_are_no_ops_and_nobody_is_an_admin(self, zalo: FakeZalo) -> None:
        async with running_zalo(zalo, Handler()) as channel:
            chat = ChatRef("zalo", "g1", ChatType.GROUP)
            await channel.add_reaction(MessageRef(chat, "m1"), "👀")
            await channel.remove_reaction(MessageRef(chat, "m1"), "👀")
            assert await channel.is_admin(chat, "u1") is False
            methods = {r.method for r in zalo.requests}
        assert methods <= {"getMe", "getWebhookInfo", "getUpdates"}
