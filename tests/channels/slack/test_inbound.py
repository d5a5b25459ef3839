"""channels/slack/_inbound.py: Slack events and slash commands → InboundMessage, each post once.

A DM is one conversation, each channel thread its own session; a top-level ``/stop`` goes to the
sender's latest thread in that channel. The thread lookup (``conversations.replies``) runs
against the fake Slack with the real ``slack_sdk`` client.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from channels import NotAccepted
from channels.slack._inbound import (
    THREAD_CONTEXT_CHARS,
    InboundNormalizer,
    display_name,
    is_command,
)
from channels.types import ChatRef, ChatType
from tests.fakes.slack_events import app_mention_event, event_callback, message_event, next_ts
from tests.fakes.slack_server import FakeSlack
from tests.inbound_support import MemorySeen


def normalizer(
    slack: FakeSlack, seen: MemorySeen | None = None, *, reply_in_thread: bool = True
) -> InboundNormalizer:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url, timeout=5)
    inbound = InboundNormalizer(
        client,
        seen if seen is not None else MemorySeen(),
        name="slack",
        reply_in_thread=reply_in_thread,
    )
    inbound.bot_user_id, inbound.bot_id = slack.bot_user_id, slack.bot_id
    return inbound


async def deliver(
    inbound: InboundNormalizer, event: dict[str, Any], *, mention: bool = False, **kw: Any
) -> Any:
    return await inbound.event(event, event_callback(event, **kw), mention=mention)


class _FailingSeen(MemorySeen):
    async def has_seen(self, key: str) -> bool:
        raise OSError("database down")


class TestSessions:
    async def test_a_dm_is_one_addressed_conversation(self, slack: FakeSlack) -> None:
        msg = await deliver(normalizer(slack), message_event("hi", channel="D1"))
        assert msg.chat == ChatRef("slack", "D1", ChatType.DIRECT, None)
        assert msg.addressed is True
        assert msg.text == "hi" and msg.sender.id == "UALICE"

    async def test_a_top_level_mention_opens_a_thread_for_its_answer(
        self, slack: FakeSlack
    ) -> None:
        event = message_event("<@UBOT> what time is it?")
        msg = await deliver(normalizer(slack), event)
        assert msg.chat == ChatRef("slack", "C1", ChatType.GROUP, event["ts"])
        assert msg.addressed is True
        assert msg.text == "what time is it?"
        assert not slack.calls_of("conversations.replies")  # not in a thread: nothing to look up

    async def test_without_reply_in_thread_the_channel_is_the_session(
        self, slack: FakeSlack
    ) -> None:
        msg = await deliver(normalizer(slack, reply_in_thread=False), message_event("<@UBOT> hi"))
        assert msg.chat.thread_id is None and msg.addressed is True

    async def test_a_channel_message_without_mention_is_not_addressed(
        self, slack: FakeSlack
    ) -> None:
        msg = await deliver(normalizer(slack), message_event("just chatting"))
        assert msg.addressed is False

    async def test_the_app_mention_flag_addresses_the_bot(self, slack: FakeSlack) -> None:
        msg = await deliver(normalizer(slack), message_event("hey"), mention=True)
        assert msg.addressed is True

    async def test_each_thread_is_its_own_session(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        first = await deliver(inbound, message_event("<@UBOT> one"))
        second = await deliver(inbound, message_event("<@UBOT> two"))
        reply = await deliver(inbound, message_event("more", thread_ts=first.message_id))
        assert first.chat != second.chat
        assert reply.chat == first.chat
        assert reply.addressed is True  # a thread the bot is in needs no mention

    async def test_a_reply_in_a_dm_thread_keeps_the_thread(self, slack: FakeSlack) -> None:
        parent = next_ts()
        slack.add_thread("D1", [{"ts": parent, "user": "UALICE", "text": "start"}])
        msg = await deliver(
            normalizer(slack), message_event("reply", channel="D1", thread_ts=parent)
        )
        assert msg.chat == ChatRef("slack", "D1", ChatType.DIRECT, parent)


class TestThreads:
    async def test_a_thread_the_bot_posted_in_is_learnt_from_slack(self, slack: FakeSlack) -> None:
        parent = next_ts()
        slack.add_thread(
            "C1",
            [
                {"ts": parent, "user": "UBOB", "text": "question"},
                {"ts": next_ts(), "user": "UBOT", "bot_id": "BBOT", "text": "answer"},
            ],
        )
        msg = await deliver(normalizer(slack), message_event("follow-up", thread_ts=parent))
        assert msg.addressed is True
        assert msg.chat.thread_id == parent
        assert msg.text == "follow-up"  # the session has the thread already: no quote
        assert msg.reply_to_text == "question"
        [call] = slack.calls_of("conversations.replies")
        assert call.args["channel"] == "C1" and call.args["ts"] == parent

    async def test_a_thread_whose_parent_mentions_the_bot_is_ours(self, slack: FakeSlack) -> None:
        parent = next_ts()
        slack.add_thread("C1", [{"ts": parent, "user": "UBOB", "text": "<@UBOT> look"}])
        msg = await deliver(normalizer(slack), message_event("and this", thread_ts=parent))
        assert msg.addressed is True

    async def test_joining_a_foreign_thread_quotes_its_start(self, slack: FakeSlack) -> None:
        parent = next_ts()
        long_text = "word\n  " * 200
        slack.add_thread("C1", [{"ts": parent, "user": "UBOB", "text": long_text}])
        msg = await deliver(normalizer(slack), message_event("<@UBOT> thoughts?", thread_ts=parent))
        assert msg.addressed is True
        quoted = " ".join(long_text.split())[:THREAD_CONTEXT_CHARS]
        assert msg.text == f'[In a thread that starts with: "{quoted}"]\nthoughts?'
        assert msg.reply_to_text == long_text

    async def test_a_foreign_thread_without_mention_is_not_addressed(
        self, slack: FakeSlack
    ) -> None:
        parent = next_ts()
        slack.add_thread("C1", [{"ts": parent, "user": "UBOB", "text": "people talking"}])
        msg = await deliver(normalizer(slack), message_event("indeed", thread_ts=parent))
        assert msg.addressed is False

    async def test_a_command_in_a_foreign_thread_is_not_quoted(self, slack: FakeSlack) -> None:
        parent = next_ts()
        slack.add_thread("C1", [{"ts": parent, "user": "UBOB", "text": "people talking"}])
        msg = await deliver(normalizer(slack), message_event("<@UBOT> /stop", thread_ts=parent))
        assert msg.text == "/stop"

    async def test_a_failed_lookup_falls_back_to_what_is_remembered(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        parent = next_ts()
        inbound.join_thread("C1", parent)
        slack.fail("conversations.replies", error="internal_error")
        msg = await deliver(inbound, message_event("still there?", thread_ts=parent))
        assert msg.addressed is True and msg.reply_to_text is None
        assert msg.text == "still there?"
        slack.fail("conversations.replies", error="internal_error")
        other = await deliver(inbound, message_event("hello?", thread_ts=next_ts()))
        assert other.addressed is False


class TestStopRouting:
    async def test_a_top_level_stop_goes_to_the_senders_latest_thread(
        self, slack: FakeSlack
    ) -> None:
        inbound = normalizer(slack)
        await deliver(inbound, message_event("<@UBOT> first"))
        latest = await deliver(inbound, message_event("<@UBOT> second"))
        stop = await deliver(inbound, message_event("<@UBOT> /stop"))
        assert stop.text == "/stop"
        assert stop.chat.thread_id == latest.chat.thread_id
        assert stop.chat.thread_id != stop.message_id

    async def test_another_users_stop_does_not_reach_the_thread(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        await deliver(inbound, message_event("<@UBOT> work", user="UALICE"))
        stop = await deliver(inbound, message_event("<@UBOT> /stop", user="UBOB"))
        assert stop.chat.thread_id is None

    async def test_a_reply_in_a_thread_makes_it_the_latest(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        first = await deliver(inbound, message_event("<@UBOT> first"))
        await deliver(inbound, message_event("<@UBOT> second"))
        await deliver(inbound, message_event("back here", thread_ts=first.message_id))
        stop = await deliver(inbound, message_event("/STOP "))
        assert stop.chat.thread_id == first.chat.thread_id

    async def test_slash_stop_goes_to_the_latest_thread_in_that_channel(
        self, slack: FakeSlack
    ) -> None:
        inbound = normalizer(slack)
        asked = await deliver(inbound, message_event("<@UBOT> go", channel="C2"))
        command = {"command": "/stop", "channel_id": "C2", "user_id": "UALICE", "trigger_id": "t1"}
        msg = inbound.command(command)
        assert msg is not None
        assert msg.chat == ChatRef("slack", "C2", ChatType.GROUP, asked.chat.thread_id)
        assert msg.message_id == "command:t1" and msg.text == "/stop"
        assert msg.metadata == {"slash_command": "/stop"}
        assert msg.sender.name == "UALICE"
        elsewhere = inbound.command({**command, "channel_id": "C3"})
        assert elsewhere is not None and elsewhere.chat.thread_id is None

    def test_slash_stopall_in_a_dm_has_no_thread(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        msg = inbound.command(
            {"command": "/stopall", "channel_id": "D9", "user_id": "U1", "user_name": "ann"}
        )
        assert msg is not None
        assert msg.chat == ChatRef("slack", "D9", ChatType.DIRECT, None)
        assert msg.sender.name == "ann" and msg.message_id.startswith("command:")

    @pytest.mark.parametrize(
        "command",
        [
            {"command": "/deploy", "channel_id": "C1", "user_id": "U1"},
            {"command": "/stop", "channel_id": "", "user_id": "U1"},
            {"command": "/stop", "channel_id": "C1"},
        ],
    )
    def test_other_or_malformed_commands_are_none(
        self, slack: FakeSlack, command: dict[str, Any]
    ) -> None:
        assert normalizer(slack).command(command) is None


class TestDedupe:
    async def test_a_retried_event_is_taken_once(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        event = message_event("hi", channel="D1")
        assert await deliver(inbound, event, event_id="Ev1") is not None
        assert await deliver(inbound, dict(event), event_id="Ev1") is None

    async def test_the_message_and_app_mention_of_one_post_are_taken_once(
        self, slack: FakeSlack
    ) -> None:
        inbound = normalizer(slack)
        event = message_event("<@UBOT> hi")
        assert await deliver(inbound, event) is not None
        assert await deliver(inbound, app_mention_event(event), mention=True) is None

    async def test_the_persistent_store_survives_a_restart(self, slack: FakeSlack) -> None:
        seen = MemorySeen()
        event = message_event("hi", channel="D1")
        first = normalizer(slack, seen)
        msg = await deliver(first, event, event_id="Ev7")
        assert msg is not None
        await first.remember(msg)  # the bot took it
        assert "slack:event:Ev7" in seen.keys
        assert await deliver(normalizer(slack, seen), event, event_id="Ev7") is None

    async def test_an_event_counts_as_seen_only_once_the_bot_took_it(
        self, slack: FakeSlack
    ) -> None:
        seen = MemorySeen()
        event = message_event("hi", channel="D1")
        assert await deliver(normalizer(slack, seen), event, event_id="Ev10") is not None
        assert "slack:event:Ev10" not in seen.keys  # e.g. killed before the bot stored it
        assert await deliver(normalizer(slack, seen), event, event_id="Ev10") is not None

    async def test_a_forgotten_message_counts_when_redelivered(self, slack: FakeSlack) -> None:
        seen = MemorySeen()
        inbound = normalizer(slack, seen)
        event = message_event("hi", channel="D1")
        msg = await deliver(inbound, event, event_id="Ev8")
        assert msg is not None
        inbound.forget(msg)
        assert await deliver(inbound, event, event_id="Ev8") is not None

    async def test_an_unavailable_store_refuses_and_the_retry_counts(
        self, slack: FakeSlack
    ) -> None:
        seen = _FailingSeen()
        inbound = normalizer(slack, seen)
        event = message_event("hi", channel="D1")
        with pytest.raises(NotAccepted):
            await deliver(inbound, event, event_id="Ev9")
        inbound.seen = MemorySeen()
        assert await deliver(inbound, event, event_id="Ev9") is not None


class TestIgnored:
    @pytest.mark.parametrize("subtype", ["message_changed", "message_deleted", "channel_join"])
    async def test_edits_and_non_user_subtypes(self, slack: FakeSlack, subtype: str) -> None:
        event = message_event("hi", channel="D1", subtype=subtype)
        assert await deliver(normalizer(slack), event) is None

    @pytest.mark.parametrize(
        "extra", [{"bot_id": "B2"}, {"user": "UBOT"}, {"bot_profile": {"name": "other"}}]
    )
    async def test_bots_and_our_own_posts(self, slack: FakeSlack, extra: dict[str, Any]) -> None:
        assert await deliver(normalizer(slack), message_event("hi", channel="D1", **extra)) is None

    async def test_an_event_without_user_or_ts(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        assert await deliver(inbound, message_event("hi", channel="D1", user="")) is None
        no_ts = message_event("hi", channel="D1")
        del no_ts["ts"]
        assert await deliver(inbound, no_ts) is None

    async def test_a_file_share_is_taken(self, slack: FakeSlack) -> None:
        event = message_event("see", channel="D1", subtype="file_share")
        assert await deliver(normalizer(slack), event) is not None


class TestAsker:
    async def test_who_asked_in_a_message_and_its_thread(self, slack: FakeSlack) -> None:
        inbound = normalizer(slack)
        msg = await deliver(inbound, message_event("<@UBOT> hi", user="UANN"), team="T9")
        assert inbound.asker("C1", msg.message_id) == ("UANN", "T9")
        assert inbound.asker("C1", None, "unknown", msg.chat.thread_id) == ("UANN", "T9")
        assert inbound.asker("C2", msg.message_id) == ("", "")
        assert msg.metadata["team"] == "T9" and msg.metadata["event_id"]


def test_is_command() -> None:
    assert is_command(" /Stop ") and is_command("/stopall")
    assert not is_command("/stop now") and not is_command("stop")


def test_display_name() -> None:
    assert display_name({"user_profile": {"display_name": "Ann"}}, "U1") == "Ann"
    assert display_name({"user_profile": {"real_name": "Ann Lee"}}, "U1") == "Ann Lee"
    assert display_name({"user_profile": {}}, "U1") == "U1"
    assert display_name({}, "U1") == "U1"
