"""Slack events in, on the adapter alone against the fake Slack: an event is acknowledged only
once the bot has it, one the bot refused is delivered again, and nothing unsigned gets in."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from channels import ChatType
from tests.fakes.slack_events import event_callback, message_event, next_ts
from tests.fakes.slack_server import FakeSlack
from tests.inbound_support import Handler, MemorySeen, running_slack, webhook_client
from tests.waiting import wait_until


def dm(text: str = "hi") -> dict[str, Any]:
    return event_callback(message_event(text, channel="D1"))


class TestHttp:
    async def test_an_event_is_handed_over_before_the_200(self, slack: FakeSlack) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "http") as (_, sender):
            response = await sender.send(dm("hello"))
            # No waiting: the handler ran inside the request.
            assert response.status_code == 200
            assert handler.texts() == ["hello"]
            assert handler.taken[0].chat.chat_type is ChatType.DIRECT

    async def test_a_refused_event_is_503_and_its_redelivery_is_taken(
        self, slack: FakeSlack
    ) -> None:
        handler, seen = Handler(refuse=1), MemorySeen()
        async with running_slack(slack, handler, "http", seen=seen) as (_, sender):
            payload = dm("again")
            with capture_logs() as logs:
                refused = await sender.send(payload)
            assert refused.status_code == 503
            assert handler.refused_texts() == ["again"] and handler.taken == []
            assert any(e["event"] == "slack.not_accepted" for e in logs)
            assert seen.keys == set()  # nothing says "seen", so the retry is not skipped
            retried = await sender.send(payload, retry_num=1)
            assert retried.status_code == 200
            assert handler.texts() == ["again"]

    async def test_a_handler_failure_is_logged_and_acknowledged(self, slack: FakeSlack) -> None:
        handler = Handler(error=RuntimeError("the bot broke"))
        async with running_slack(slack, handler, "http") as (_, sender):
            with capture_logs() as logs:
                response = await sender.send(dm())
        # Acked: a bad event must not come back forever.
        assert response.status_code == 200
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["slack.event_failed"]

    @pytest.mark.parametrize(
        "forgery", [{"secret": "wrong"}, {"timestamp": 1_000_000_000}], ids=["secret", "stale"]
    )
    async def test_a_badly_signed_request_is_401_and_not_handed_over(
        self, slack: FakeSlack, forgery: dict[str, Any]
    ) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "http") as (_, sender):
            with capture_logs() as logs:
                response = await sender.send(dm(), **forgery)
        assert response.status_code == 401
        assert handler.taken == [] and handler.refused == []
        assert [e.get("reason") for e in logs if e["event"] == "slack.webhook_rejected"] == [
            "bad_signature"
        ]

    async def test_url_verification_is_answered(self, slack: FakeSlack) -> None:
        async with running_slack(slack, Handler(), "http") as (_, sender):
            challenge = {"type": "url_verification", "token": "t", "challenge": "c-123"}
            response = await sender.send(challenge)
        assert response.status_code == 200
        assert response.json() == {"challenge": "c-123"}

    async def test_ignored_events_are_acknowledged_without_a_message(
        self, slack: FakeSlack
    ) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "http") as (_, sender):
            thread = {
                "user_id": "UALICE",
                "context": {"channel_id": "C1", "team_id": "T1"},
                "channel_id": "D1",
                "thread_ts": next_ts(),
            }
            event = {"type": "assistant_thread_started", "assistant_thread": thread}
            response = await sender.send(event_callback(event))
        assert response.status_code == 200
        assert handler.taken == []

    async def test_a_slash_command_is_acknowledged_then_handed_over(self, slack: FakeSlack) -> None:
        handler = Handler()
        handler.hold()
        async with running_slack(slack, handler, "http") as (_, sender):
            command = sender.send_command("/stop", user="UALICE", channel="D1")
            response = await asyncio.wait_for(command, 5)
            # The 200 came while the bot still holds the command: acked first.
            assert response.status_code == 200
            await handler.wait_for(lambda: handler.holding == 1)
            handler.release()
            await handler.wait_for(lambda: handler.taken)
        assert handler.taken[0].text == "/stop"

    async def test_no_handler_or_socket_mode_means_503(self, slack: FakeSlack) -> None:
        async with running_slack(slack, Handler(), "socket") as (channel, sender):
            response = await sender.send(dm())
            assert response.status_code == 503
            assert json.loads(response.text) == {"error": "slack http mode is not running"}
        async with running_slack(slack, Handler(), "http") as (channel, sender):
            channel.receiver.handler = None
            assert (await sender.send(dm())).status_code == 503

    async def test_an_unsigned_request_costs_no_parsing(self, slack: FakeSlack) -> None:
        handler = Handler()
        async with (
            running_slack(slack, handler, "http") as (channel, _),
            webhook_client(channel.webhook_path, channel.handle_webhook) as http,
        ):
            response = await http.post(channel.webhook_path, content=b"not json at all")
        assert response.status_code == 401
        assert handler.taken == []


class TestSocketMode:
    async def test_an_envelope_is_acked_once_the_bot_has_the_event(self, slack: FakeSlack) -> None:
        handler = Handler()
        handler.hold()
        async with running_slack(slack, handler, "socket"):
            envelope = await slack.push(dm("over the socket"))
            await handler.wait_for(lambda: handler.holding == 1)
            assert envelope not in slack.acks
            handler.release()
            await slack.wait_for(lambda: envelope in slack.acks)
        assert handler.texts() == ["over the socket"]

    async def test_a_refused_event_stays_unacked_and_its_redelivery_is_taken(
        self, slack: FakeSlack
    ) -> None:
        handler = Handler(refuse=1)
        async with running_slack(slack, handler, "socket"):
            payload = dm("twice")
            first = await slack.push(payload)
            await handler.wait_for(lambda: handler.refused)
            second = await slack.push(payload)  # Slack delivers it again
            await slack.wait_for(lambda: second in slack.acks)
            assert first not in slack.acks
        assert handler.texts() == ["twice"]

    async def test_envelopes_after_stop_receiving_are_refused_unacked(
        self, slack: FakeSlack
    ) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "socket") as (channel, _):
            # Closed intake with the socket still open: what the socket brings is not taken.
            await channel.receiver.intake.close()
            with capture_logs() as logs:
                envelope = await slack.push(dm("late"))
                await wait_until(lambda: any(e["event"] == "slack.envelope_refused" for e in logs))
            assert envelope not in slack.acks
        assert handler.taken == []


async def test_a_failing_dedupe_store_refuses_the_event(slack: FakeSlack) -> None:
    class DownSeen(MemorySeen):
        async def has_seen(self, key: str) -> bool:
            raise OSError("database down")

    handler = Handler()
    async with running_slack(slack, handler, "http", seen=DownSeen()) as (_, sender):
        response = await sender.send(dm())
    assert response.status_code == 503  # Slack retries it once the store is back
    assert handler.taken == []
