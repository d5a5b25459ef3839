"""Issue 11: a platform is acknowledged only once the bot has the message.

Each adapter runs against its fake platform (real client libraries, real HTTP) with a handler the
test controls (:mod:`tests.inbound_support`). When the handler refuses a message (``NotAccepted``)
the platform must not consider it delivered: a webhook answers 503, a Telegram poller leaves the
offset before it, a Zalo poller keeps the update, Socket Mode sends no ack. The Zalo adapter
records an update as seen only after the bot took it (so neither a refusal nor a kill before
that leaves a record that would hide the redelivery); Slack's forgets its record. The Telegram
adapter records no message at all: the bot dedupes it on its own key where it stores it
(tests/e2e/test_telegram.py), so a redelivery reaches the handler under the same key.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from structlog.testing import capture_logs

from channels.telegram._channel import SECRET_HEADER
from channels.telegram._polling import OFFSET_KEY
from channels.zalo._channel import SECRET_HEADER as ZALO_SECRET_HEADER
from tests.fakes.slack_events import event_callback, message_event
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import FakeZalo, text_event
from tests.inbound_support import (
    TELEGRAM_SECRET,
    ZALO_SECRET,
    Handler,
    MemorySeen,
    MemoryState,
    pending,
    running_slack,
    running_telegram,
    running_zalo,
    webhook_client,
)


class TestTelegramPolling:
    async def test_refused_update_stays_unconfirmed_and_is_taken_on_the_next_fetch(
        self, tg: FakeTelegram
    ) -> None:
        handler, seen, state = Handler(refuse=1), MemorySeen(), MemoryState()
        async with running_telegram(tg, handler, seen=seen, state=state):
            tg.push(tg.private_message("one"))
            second = tg.push(tg.private_message("two"))
            # Fetched again only because its offset was never confirmed (the fake, like
            # Telegram, drops confirmed updates); "two" waits behind it.
            await handler.wait_for(lambda: len(handler.taken) == 2)
            assert handler.refused_texts() == ["one"]
            assert handler.texts() == ["one", "two"]
            assert seen.forgotten == []
            assert seen.keys == set()  # a message: the bot dedupes it on its own key
            assert state.values[("telegram", OFFSET_KEY)] == str(second + 1)


class TestTelegramWebhook:
    def update(self, tg: FakeTelegram, text: str) -> dict[str, Any]:
        return {"update_id": tg.new_update_id(), **tg.private_message(text)}

    async def test_refused_update_gets_503_and_its_redelivery_is_taken(
        self, tg: FakeTelegram
    ) -> None:
        handler, seen = Handler(refuse=1), MemorySeen()
        async with running_telegram(tg, handler, seen=seen, mode="webhook") as channel:
            update = self.update(tg, "hello")
            headers = {SECRET_HEADER: TELEGRAM_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                refused = await http.post(channel.webhook_path, json=update, headers=headers)
                assert refused.status_code == 503
                assert f"telegram:update:{update['update_id']}" not in seen.keys
                taken = await http.post(channel.webhook_path, json=update, headers=headers)
                again = await http.post(channel.webhook_path, json=update, headers=headers)
        assert (taken.status_code, again.status_code) == (200, 200)
        # Handed over again under the same key: the bot's inbox drops the duplicate.
        taken_msg, again_msg = handler.taken
        assert taken_msg.dedupe_key == again_msg.dedupe_key
        assert seen.keys == set()

    async def test_answers_only_after_the_handler_returned(self, tg: FakeTelegram) -> None:
        handler = Handler()
        handler.hold()
        async with running_telegram(tg, handler, mode="webhook") as channel:
            headers = {SECRET_HEADER: TELEGRAM_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                post = asyncio.ensure_future(
                    http.post(channel.webhook_path, json=self.update(tg, "hi"), headers=headers)
                )
                await handler.wait_for(lambda: handler.holding == 1)
                assert await pending(post)
                handler.release()
                assert (await post).status_code == 200
        assert handler.texts() == ["hi"]

    async def test_an_update_that_fails_otherwise_is_acknowledged(self, tg: FakeTelegram) -> None:
        # Only NotAccepted means "deliver again": a poison update must not come back forever.
        handler = Handler(error=RuntimeError("bug"))
        async with running_telegram(tg, handler, mode="webhook") as channel:
            headers = {SECRET_HEADER: TELEGRAM_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                with capture_logs() as logs:
                    response = await http.post(
                        channel.webhook_path, json=self.update(tg, "boom"), headers=headers
                    )
        assert response.status_code == 200
        assert any(e["event"] == "telegram.update_failed" for e in logs)


class TestZaloPolling:
    async def test_refused_update_is_kept_and_offered_again_in_order(self, zalo: FakeZalo) -> None:
        zalo.updates_shape = "list"
        handler, seen = Handler(refuse=2), MemorySeen()
        zalo.push(text_event("one", chat_id="u1"), text_event("two", chat_id="u1"))
        async with running_zalo(zalo, handler, seen=seen):
            await handler.wait_for(lambda: len(handler.taken) == 2)
        # Zalo handed both over in the first getUpdates and can't do it again: the adapter kept
        # them until the bot took them.
        assert zalo.pending_updates == 0
        assert handler.refused_texts() == ["one", "one"]
        assert handler.texts() == ["one", "two"]
        assert seen.forgotten == []  # never recorded while refused
        assert len(seen.keys) == 2  # both recorded once taken


class TestZaloWebhook:
    async def test_refused_update_gets_503_and_its_redelivery_is_taken_once(
        self, zalo: FakeZalo
    ) -> None:
        handler, seen = Handler(refuse=1), MemorySeen()
        async with running_zalo(zalo, handler, seen=seen, mode="webhook") as channel:
            payload = text_event("xin chào", chat_id="u1", message_id="m-1")
            headers = {ZALO_SECRET_HEADER: ZALO_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                refused = await http.post(channel.webhook_path, json=payload, headers=headers)
                assert refused.status_code == 503
                assert "zalo:event:u1:m-1" not in seen.keys
                taken = await http.post(channel.webhook_path, json=payload, headers=headers)
                again = await http.post(channel.webhook_path, json=payload, headers=headers)
        assert (taken.status_code, again.status_code) == (200, 200)
        assert handler.texts() == ["xin chào"]

    async def test_answers_only_after_the_handler_returned(self, zalo: FakeZalo) -> None:
        handler = Handler()
        handler.hold()
        async with running_zalo(zalo, handler, mode="webhook") as channel:
            headers = {ZALO_SECRET_HEADER: ZALO_SECRET}
            payload = text_event("hi", chat_id="u1")
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                post = asyncio.ensure_future(
                    http.post(channel.webhook_path, json=payload, headers=headers)
                )
                await handler.wait_for(lambda: handler.holding == 1)
                assert await pending(post)
                handler.release()
                assert (await post).status_code == 200
        assert handler.texts() == ["hi"]


class TestSlack:
    async def test_http_refused_event_gets_503_and_slacks_retry_is_taken(
        self, slack: FakeSlack
    ) -> None:
        handler, seen = Handler(refuse=1), MemorySeen()
        async with running_slack(slack, handler, "http", seen=seen) as (_, sender):
            payload = event_callback(message_event("hello", channel="D1"), event_id="EvHTTP")
            refused = await sender.send(payload)
            assert refused.status_code == 503
            assert "slack:event:EvHTTP" not in seen.keys
            retried = await sender.send(payload, retry_num=1)
            assert retried.status_code == 200
            assert "slack:event:EvHTTP" in seen.keys
            again = await sender.send(payload, retry_num=2)
            assert again.status_code == 200
        assert handler.texts() == ["hello"]

    async def test_socket_refused_envelope_is_not_acked_and_the_redelivery_is_taken(
        self, slack: FakeSlack
    ) -> None:
        handler, seen = Handler(refuse=1), MemorySeen()
        async with running_slack(slack, handler, "socket", seen=seen):
            message = message_event("<@UBOT> hello", channel="C1")
            payload = event_callback(message, event_id="EvSOCK")
            refused = await slack.push(payload)
            await handler.wait_for(lambda: handler.refused)
            redelivered = await slack.push(payload)  # Slack retries an unacked envelope
            await slack.wait_for(lambda: redelivered in slack.acks)
            assert refused not in slack.acks
        assert handler.texts() == ["hello"]
        assert "slack:event:EvSOCK" in seen.keys  # recorded once taken, not when refused

    @pytest.mark.parametrize("mode", ["http", "socket"])
    async def test_event_is_acked_only_after_the_handler_returned(
        self, slack: FakeSlack, mode: Literal["http", "socket"]
    ) -> None:
        handler = Handler()
        handler.hold()
        async with running_slack(slack, handler, mode) as (_, sender):
            payload = event_callback(message_event("hi", channel="D1"))
            if mode == "http":
                acked: asyncio.Future[Any] = asyncio.ensure_future(sender.send(payload))
            else:
                envelope = await slack.push(payload)
                acked = asyncio.ensure_future(slack.wait_for(lambda: envelope in slack.acks))
            await handler.wait_for(lambda: handler.holding == 1)
            assert await pending(acked)
            handler.release()
            result = await acked
            if mode == "http":
                assert result.status_code == 200
        assert handler.texts() == ["hi"]


class Killed(BaseException):
    """The process dies while the bot handles the update: no handler or cleanup of the adapter
    runs after this point (``except Exception`` does not catch it, as nothing catches SIGKILL)."""


class TestAKillBeforeTheBotStoredTheUpdate:
    """Issue 27: an update counted as seen although nobody stored it was never answered."""

    async def test_telegram_takes_the_redelivery(self, tg: FakeTelegram) -> None:
        seen = MemorySeen()
        update = {"update_id": tg.new_update_id(), **tg.private_message("are you there?")}
        key = f"telegram:update:{update['update_id']}"
        headers = {SECRET_HEADER: TELEGRAM_SECRET}
        async with (
            running_telegram(tg, Handler(error=Killed()), seen=seen, mode="webhook") as channel,
            webhook_client(channel.webhook_path, channel.handle_webhook) as http,
        ):
            with pytest.raises(Killed):
                await http.post(channel.webhook_path, json=update, headers=headers)
        assert key not in seen.keys
        survivor = Handler()  # the next process, on the same store, gets the redelivery
        async with running_telegram(tg, survivor, seen=seen, mode="webhook") as ch:
            http = webhook_client(ch.webhook_path, ch.handle_webhook)
            async with http:
                taken = await http.post(ch.webhook_path, json=update, headers=headers)
        assert taken.status_code == 200
        assert survivor.texts() == ["are you there?"]
        assert key not in seen.keys  # a message: deduped by the bot on its own key

    async def test_zalo_takes_the_redelivery(self, zalo: FakeZalo) -> None:
        seen = MemorySeen()
        payload = text_event("còn đó không?", chat_id="u1", message_id="m-9")
        headers = {ZALO_SECRET_HEADER: ZALO_SECRET}
        async with running_zalo(zalo, Handler(error=Killed()), seen=seen, mode="webhook") as ch:
            http = webhook_client(ch.webhook_path, ch.handle_webhook)
            async with http:
                with pytest.raises(Killed):
                    await http.post(ch.webhook_path, json=payload, headers=headers)
        assert "zalo:event:u1:m-9" not in seen.keys
        survivor = Handler()
        async with running_zalo(zalo, survivor, seen=seen, mode="webhook") as ch:
            http = webhook_client(ch.webhook_path, ch.handle_webhook)
            async with http:
                taken = await http.post(ch.webhook_path, json=payload, headers=headers)
        assert taken.status_code == 200
        assert survivor.texts() == ["còn đó không?"]

    async def test_slack_takes_the_redelivery(self, slack: FakeSlack) -> None:
        seen = MemorySeen()
        payload = event_callback(message_event("still there?", channel="D1"), event_id="EvKILL")
        async with running_slack(slack, Handler(error=Killed()), "http", seen=seen) as (_, sender):
            with pytest.raises(Killed):
                await sender.send(payload)
        assert "slack:event:EvKILL" not in seen.keys
        survivor = Handler()
        async with running_slack(slack, survivor, "http", seen=seen) as (_, sender):
            taken = await sender.send(payload, retry_num=1)
        assert taken.status_code == 200
        assert survivor.texts() == ["still there?"]
        assert "slack:event:EvKILL" in seen.keys
