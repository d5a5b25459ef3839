"""``Channel.stop_receiving``: the first step of a graceful shutdown (issue 11).

Intake stops (polling ends, a socket closes, webhooks answer 503) while sending still works, and
what was already fetched is handed over before it returns. ``stop()`` still works after it.
"""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from channels import ChatRef, ChatType
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
    MemoryState,
    pending,
    running_slack,
    running_telegram,
    running_zalo,
    webhook_client,
)


def live_tasks(name: str) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == name and not t.done()]


class TestTelegram:
    async def test_polling_ends_and_sending_still_works(self, tg: FakeTelegram) -> None:
        handler = Handler()
        async with running_telegram(tg, handler) as channel:
            await tg.wait_for(lambda: tg.calls_of("getUpdates"))
            await channel.stop_receiving()
            assert live_tasks("telegram:poll") == []
            polls = len(tg.calls_of("getUpdates"))
            late = tg.push(tg.private_message("after the stop"))
            await channel.send_text(ChatRef("telegram", "42", ChatType.DIRECT), "still here")
            assert tg.texts() == ["still here"]
            await channel.stop_receiving()  # idempotent
        assert len(tg.calls_of("getUpdates")) == polls
        assert handler.taken == []
        # Never confirmed: Telegram hands it to the next process.
        assert [u["update_id"] for u in tg.updates] == [late]

    async def test_a_batch_being_handed_over_is_finished_first(self, tg: FakeTelegram) -> None:
        handler, state = Handler(), MemoryState()
        handler.hold()
        async with running_telegram(tg, handler, state=state) as channel:
            tg.push(tg.private_message("one"))
            second = tg.push(tg.private_message("two"))
            await handler.wait_for(lambda: handler.holding == 1)
            stopping = asyncio.ensure_future(channel.stop_receiving())
            assert await pending(stopping)
            handler.release()
            await stopping
            assert handler.texts() == ["one", "two"]
            assert state.values[("telegram", OFFSET_KEY)] == str(second + 1)

    async def test_webhooks_answer_503_afterwards(self, tg: FakeTelegram) -> None:
        handler = Handler()
        async with running_telegram(tg, handler, mode="webhook") as channel:
            await channel.stop_receiving()
            update = {"update_id": tg.new_update_id(), **tg.private_message("late")}
            headers = {SECRET_HEADER: TELEGRAM_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                response = await http.post(channel.webhook_path, json=update, headers=headers)
        assert response.status_code == 503
        assert handler.taken == []


class TestZalo:
    async def test_polling_ends_and_sending_still_works(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with running_zalo(zalo, handler) as channel:
            await zalo.wait_for(lambda: zalo.calls("getUpdates"))
            await channel.stop_receiving()
            assert live_tasks("zalo:runner") == []
            polls = len(zalo.calls("getUpdates"))
            zalo.push(text_event("after the stop", chat_id="u1"))
            await channel.send_text(ChatRef("zalo", "u1", ChatType.DIRECT), "still here")
            assert zalo.texts() == ["still here"]
        assert len(zalo.calls("getUpdates")) == polls
        assert zalo.pending_updates == 1 and handler.taken == []

    async def test_a_fetched_batch_is_handed_over_before_it_returns(self, zalo: FakeZalo) -> None:
        zalo.updates_shape = "list"
        handler = Handler()
        handler.hold()
        async with running_zalo(zalo, handler) as channel:
            zalo.push(text_event("one", chat_id="u1"), text_event("two", chat_id="u2"))
            await handler.wait_for(lambda: handler.holding == 1)
            stopping = asyncio.ensure_future(channel.stop_receiving())
            assert await pending(stopping)
            handler.release()
            await stopping
            assert handler.texts() == ["one", "two"]

    async def test_refusals_while_stopping_end_after_the_grace_and_are_logged(
        self, zalo: FakeZalo
    ) -> None:
        handler = Handler(refuse=1_000)
        zalo.push(text_event("never taken", chat_id="u1", message_id="m-9"))
        async with running_zalo(zalo, handler, handover_grace=0.3) as channel:
            await handler.wait_for(lambda: handler.refused)
            with capture_logs() as logs:
                await asyncio.wait_for(channel.stop_receiving(), 5)
        lost = [e for e in logs if e["event"] == "zalo.updates_lost"]
        assert lost and lost[0]["message_ids"] == ["m-9"]
        assert lost[0]["log_level"] == "error"

    async def test_webhooks_answer_503_afterwards(self, zalo: FakeZalo) -> None:
        handler = Handler()
        async with running_zalo(zalo, handler, mode="webhook") as channel:
            await channel.stop_receiving()
            payload = text_event("late", chat_id="u1")
            headers = {ZALO_SECRET_HEADER: ZALO_SECRET}
            async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
                response = await http.post(channel.webhook_path, json=payload, headers=headers)
        assert response.status_code == 503
        assert handler.taken == []


class TestSlack:
    async def test_socket_closes_after_the_event_in_hand_is_acked(self, slack: FakeSlack) -> None:
        handler = Handler()
        handler.hold()
        async with running_slack(slack, handler, "socket") as (channel, _):
            envelope = await slack.push(event_callback(message_event("hi", channel="D1")))
            await handler.wait_for(lambda: handler.holding == 1)
            stopping = asyncio.ensure_future(channel.stop_receiving())
            assert await pending(stopping)
            handler.release()
            await stopping
            assert envelope in slack.acks
            await slack.wait_for(lambda: not slack.socket_open)
            await channel.send_text(ChatRef("slack", "D1", ChatType.DIRECT), "still here")
            assert [p.text for p in slack.posts] == ["still here"]
        assert handler.texts() == ["hi"]
        assert slack.socket_connections == 1

    async def test_http_events_answer_503_afterwards(self, slack: FakeSlack) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "http") as (channel, sender):
            await channel.stop_receiving()
            response = await sender.send(event_callback(message_event("late", channel="D1")))
            await channel.send_text(ChatRef("slack", "D1", ChatType.DIRECT), "still here")
        assert response.status_code == 503
        assert handler.taken == []
        assert [p.text for p in slack.posts] == ["still here"]
