"""The Slack adapter on its own against the fake Slack: start-up, posting, reactions, admins,
pacing and shutdown. Receiving is test_receiving.py; streams and edits test_streaming.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels import ChatRef, ChatType, MessageRef
from channels.errors import ChannelError, Forbidden
from channels.slack import SlackChannel, SlackSettings
from tests.fakes.slack_events import message_event, next_ts
from tests.fakes.slack_server import FakeSlack
from tests.inbound_support import Handler, MemorySeen, running_slack
from tests.waiting import wait_until

DM = ChatRef("slack", "D1", ChatType.DIRECT)
CHANNEL = ChatRef("slack", "C1", ChatType.GROUP)


def make(slack: FakeSlack, **settings: Any) -> SlackChannel:
    values: dict[str, Any] = {
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "signing_secret": slack.signing_secret,
        "api_base_url": slack.base_url,
        "mode": "http",
        "pace_per_second": None,
        "ping_interval": 0.5,
        **settings,
    }
    return SlackChannel(SlackSettings(**values), seen=MemorySeen())


@asynccontextmanager
async def started(slack: FakeSlack, **settings: Any) -> AsyncIterator[SlackChannel]:
    channel = make(slack, **settings)
    await channel.start(Handler())
    try:
        yield channel
    finally:
        await channel.stop()


class TestStart:
    async def test_start_learns_who_the_bot_is(self, slack: FakeSlack) -> None:
        async with started(slack) as channel:
            assert (channel.bot_user_id, channel.bot_id, channel.team_id) == ("UBOT", "BBOT", "T1")
            assert (channel.inbound.bot_user_id, channel.inbound.bot_id) == ("UBOT", "BBOT")
            assert (channel.poster.bot_user_id, channel.poster.bot_id) == ("UBOT", "BBOT")
        assert [c.method for c in slack.calls] == ["auth.test"]

    async def test_an_unusable_bot_token_fails_fast(self, slack: FakeSlack) -> None:
        channel = make(slack, bot_token="xoxb-wrong")
        with pytest.raises(Forbidden, match=r"invalid_auth \(check channels.slack.bot_token\)"):
            await channel.start(Handler())
        await channel.stop()
        assert len(slack.calls_of("auth.test")) == 1

    async def test_another_auth_failure_is_a_plain_channel_error(self, slack: FakeSlack) -> None:
        slack.fail("auth.test", error="team_not_found")
        channel = make(slack)
        with pytest.raises(ChannelError, match=r"^slack auth\.test: team_not_found$") as caught:
            await channel.start(Handler())
        await channel.stop()
        assert not isinstance(caught.value, Forbidden)

    async def test_socket_mode_connects_after_auth(self, slack: FakeSlack) -> None:
        async with started(slack, mode="socket") as channel:
            socket = channel.socket
            assert socket is not None
            await slack.wait_for(lambda: socket.connections == 1)
            assert slack.calls_of("apps.connections.open")[0].token == slack.app_token
        await slack.wait_for(lambda: not slack.socket_open)
        assert channel.socket is None

    async def test_an_unusable_app_token_stops_the_start(self, slack: FakeSlack) -> None:
        channel = make(slack, mode="socket", app_token="xapp-wrong")
        with pytest.raises(Forbidden, match=r"invalid_auth \(check channels.slack.app_token\)"):
            await channel.start(Handler())
        assert channel.socket is not None and channel.socket.closed
        await channel.stop()
        assert slack.socket_connections == 0

    async def test_a_passing_socket_failure_is_a_plain_channel_error(
        self, slack: FakeSlack
    ) -> None:
        slack.fail("apps.connections.open", error="internal_error")
        channel = make(slack, mode="socket")
        with pytest.raises(
            ChannelError, match=r"apps\.connections\.open: internal_error$"
        ) as caught:
            await channel.start(Handler())
        await channel.stop()
        assert not isinstance(caught.value, Forbidden)

    def test_capabilities_follow_the_settings(self, slack: FakeSlack) -> None:
        caps = make(slack).capabilities
        assert (caps.max_chars, caps.formatting, caps.threads, caps.edits) == (
            4000,
            "mrkdwn",
            True,
            True,
        )
        assert caps.typing and not make(slack, assistant_status=False).capabilities.typing


class TestSendText:
    async def test_a_dm_answer_is_inline(self, slack: FakeSlack) -> None:
        async with started(slack) as channel:
            ref = await channel.send_text(DM, "*hi*", reply_to="111.000")
        [post] = slack.posts
        assert (post.channel, post.text, post.thread_ts) == ("D1", "*hi*", None)
        assert ref == MessageRef(chat=DM, message_id=post.ts)
        assert slack.calls_of("chat.postMessage")[0].args["mrkdwn"] in (True, "true", "1")

    async def test_a_channel_answer_goes_in_the_thread_of_the_question(
        self, slack: FakeSlack
    ) -> None:
        async with started(slack) as channel:
            await channel.send_text(CHANNEL, "in thread", reply_to="111.000")
            await channel.send_text(CHANNEL, "top level")  # nothing to reply to
        assert [(p.text, p.thread_ts) for p in slack.posts] == [
            ("in thread", "111.000"),
            ("top level", None),
        ]

    async def test_without_reply_in_thread_a_channel_answer_is_top_level(
        self, slack: FakeSlack
    ) -> None:
        async with started(slack, reply_in_thread=False) as channel:
            await channel.send_text(CHANNEL, "top", reply_to="111.000")
            threaded = ChatRef("slack", "C1", ChatType.GROUP, "222.000")
            await channel.send_text(threaded, "kept", reply_to="111.000")
        assert [(p.text, p.thread_ts) for p in slack.posts] == [("top", None), ("kept", "222.000")]

    async def test_a_reply_in_a_thread_joins_it(self, slack: FakeSlack) -> None:
        handler = Handler()
        async with running_slack(slack, handler, "http") as (channel, sender):
            parent = next_ts()
            await channel.send_text(CHANNEL, "answer", reply_to=parent)
            # A follow-up in that thread needs no mention now (and no look-up at Slack).
            follow_up = message_event("and then?", channel="C1", thread_ts=parent)
            assert (await sender.send_event(follow_up)).status_code == 200
            other = message_event("elsewhere", channel="C1", thread_ts=next_ts())
            assert (await sender.send_event(other)).status_code == 200
        assert [(m.text, m.addressed) for m in handler.taken] == [
            ("and then?", True),
            ("elsewhere", False),
        ]

    async def test_a_refused_post_raises(self, slack: FakeSlack) -> None:
        slack.fail("chat.postMessage", error="channel_not_found")
        async with started(slack) as channel:
            with pytest.raises(Forbidden, match="channel_not_found"):
                await channel.send_text(CHANNEL, "lost")
        assert slack.posts == []

    async def test_posts_in_one_channel_are_paced(self, slack: FakeSlack) -> None:
        # Measures the pacing itself: 5 posts a second, a burst of 1, so the second post to C1
        # waits about 0.2 s and one to another channel does not wait.
        async with started(slack, pace_per_second=5.0, pace_burst=1) as channel:
            await channel.send_text(CHANNEL, "one")
            await channel.send_text(DM, "elsewhere")
            await channel.send_text(CHANNEL, "two")
        one, elsewhere, two = slack.calls_of("chat.postMessage")
        assert elsewhere.at - one.at < 0.15
        assert two.at - one.at >= 0.15


class TestReactions:
    async def test_an_emoji_is_sent_by_its_slack_name_and_repeats_are_fine(
        self, slack: FakeSlack
    ) -> None:
        ref = MessageRef(chat=CHANNEL, message_id="111.000")
        async with started(slack) as channel:
            await channel.add_reaction(ref, "👀")
            await channel.add_reaction(ref, "👀")  # already_reacted: nothing to do
            await channel.remove_reaction(ref, "👀")
            await channel.remove_reaction(ref, "👀")  # no_reaction: nothing to do
            await channel.add_reaction(ref, ":white_check_mark:")
        assert slack.reaction_log == [
            ("add", "C1", "111.000", "eyes"),
            ("remove", "C1", "111.000", "eyes"),
            ("add", "C1", "111.000", "white_check_mark"),
        ]

    async def test_other_reaction_errors_raise(self, slack: FakeSlack) -> None:
        ref = MessageRef(chat=CHANNEL, message_id="111.000")
        slack.fail("reactions.add", error="invalid_name")
        slack.fail("reactions.remove", error="message_not_found")
        async with started(slack) as channel:
            with pytest.raises(ChannelError, match="invalid_name"):
                await channel.add_reaction(ref, "nonsense")
            with pytest.raises(ChannelError, match="message_not_found"):
                await channel.remove_reaction(ref, "eyes")


class TestAdmins:
    @pytest.mark.parametrize(
        ("info", "admin"),
        [
            ({}, False),
            ({"is_admin": True}, True),
            ({"is_owner": True}, True),
            ({"is_primary_owner": True}, True),
        ],
    )
    async def test_workspace_admins_and_owners_are_admins(
        self, slack: FakeSlack, info: dict[str, Any], admin: bool
    ) -> None:
        slack.users["UX"] = info
        async with started(slack) as channel:
            assert await channel.is_admin(CHANNEL, "UX") is admin

    async def test_the_answer_is_cached(self, slack: FakeSlack) -> None:
        slack.users["UX"] = {"is_admin": True}
        async with started(slack) as channel:
            assert await channel.is_admin(CHANNEL, "UX")
            slack.users["UX"] = {"is_admin": False}
            assert await channel.is_admin(DM, "UX")  # still the cached answer
            assert not await channel.is_admin(DM, "UY")
        assert [c.args["user"] for c in slack.calls_of("users.info")] == ["UX", "UY"]

    async def test_a_failed_lookup_raises(self, slack: FakeSlack) -> None:
        slack.fail("users.info", error="user_not_found")
        async with started(slack) as channel:
            with pytest.raises(ChannelError, match="user_not_found"):
                await channel.is_admin(CHANNEL, "UGONE")


async def test_stop_cancels_the_adapters_background_tasks(slack: FakeSlack) -> None:
    channel = make(slack)
    await channel.start(Handler())
    forever = channel._spawn(asyncio.Event().wait(), name="slack:test")
    assert forever in channel._tasks
    await channel.stop()
    assert forever.cancelled()
    assert channel._tasks == set() and channel.receiver.handler is None


async def test_a_finished_task_leaves_the_set(slack: FakeSlack) -> None:
    channel = make(slack)

    async def quick() -> int:
        return 1

    task = channel._spawn(quick(), name="slack:test")
    assert await task == 1
    await wait_until(lambda: task not in channel._tasks)
    await channel.stop()
