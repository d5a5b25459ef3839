"""channels/slack/_posting.py: the message poster and the SDK retry handler that spares posts."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels import BadRequest, ChannelError, RetryAfter
from channels.slack._posting import MessagePoster, SafeServerErrorRetryHandler, api_method
from tests.fakes.slack_events import next_ts
from tests.fakes.slack_server import FakeSlack


class TestMessagePoster:
    """chat.postMessage retried across a 5xx or a timeout, never posted twice (real HTTP)."""

    def _poster(self, slack: FakeSlack, *, timeout: float = 5, attempts: int = 3) -> MessagePoster:
        # No slack_sdk retry handlers: every failure queued in the fake reaches the poster.
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url, timeout=timeout)
        poster = MessagePoster(client, attempts=attempts, backoff=0.01, max_backoff=0.05)
        poster.bot_user_id, poster.bot_id = slack.bot_user_id, slack.bot_id
        return poster

    async def test_landed_despite_500_is_returned_not_reposted(self) -> None:
        async with FakeSlack() as slack:
            slack.fail("chat.postMessage", status=500, after_posting=True)
            result = await self._poster(slack).post(channel="C1", text="hi")
            assert [p.text for p in slack.posts] == ["hi"]
            assert result["ts"] == slack.posts[0].ts
            assert len(slack.calls_of("chat.postMessage")) == 1

    async def test_timeout_after_posting_is_not_reposted(self) -> None:
        async with FakeSlack() as slack:
            slack.hang("chat.postMessage", 30)
            result = await self._poster(slack, timeout=0.5).post(
                channel="C1", text="hi", thread_ts="1.000001"
            )
            assert [(p.text, p.thread_ts) for p in slack.posts] == [("hi", "1.000001")]
            assert result["ts"] == slack.posts[0].ts
            assert len(slack.calls_of("conversations.replies")) == 1

    async def test_unverifiable_post_is_not_repeated(self) -> None:
        async with FakeSlack() as slack:
            slack.fail("chat.postMessage", status=500, after_posting=True)
            for _ in range(3):
                slack.fail("conversations.history", status=500)
            with pytest.raises(ChannelError, match="checking an unconfirmed post"):
                await self._poster(slack).post(channel="C1", text="hi")
            assert len(slack.calls_of("chat.postMessage")) == 1 and len(slack.posts) == 1
            assert len(slack.calls_of("conversations.history")) == 3

    async def test_a_failed_check_is_looked_at_again_before_posting(self) -> None:
        async with FakeSlack() as slack:
            slack.fail("chat.postMessage", status=500, after_posting=True)
            slack.fail("conversations.history", status=503)
            await self._poster(slack).post(channel="C1", text="hi")
            assert len(slack.posts) == 1 and len(slack.calls_of("conversations.history")) == 2

    async def test_the_last_attempt_is_checked_too(self) -> None:
        async with FakeSlack() as slack:
            for _ in range(2):
                slack.fail("chat.postMessage", status=500)
            slack.fail("chat.postMessage", status=500, after_posting=True)
            result = await self._poster(slack).post(channel="C1", text="hi")
            assert len(slack.calls_of("chat.postMessage")) == 3 and len(slack.posts) == 1
            assert result["ts"] == slack.posts[0].ts

    async def test_gives_up_after_its_attempts(self) -> None:
        async with FakeSlack() as slack:
            for _ in range(3):
                slack.fail("chat.postMessage", status=500)
            with pytest.raises(ChannelError, match="not posted after 3 attempts"):
                await self._poster(slack).post(channel="C1", text="hi")
            assert not slack.posts and len(slack.calls_of("chat.postMessage")) == 3

    async def test_the_same_text_posted_before_is_not_taken_for_it(self) -> None:
        async with FakeSlack() as slack:
            poster = self._poster(slack)
            await poster.post(channel="C1", text="Stopped.")
            # Someone else (and another bot) saying the same thing doesn't count either.
            slack.history["C1"].append({"user": "UALICE", "text": "Stopped.", "ts": next_ts()})
            slack.history["C1"].append({"bot_id": "BOTHER", "text": "Stopped.", "ts": next_ts()})
            slack.fail("chat.postMessage", status=500)
            result = await poster.post(channel="C1", text="Stopped.")
            assert [p.text for p in slack.posts] == ["Stopped.", "Stopped."]
            assert result["ts"] == slack.posts[1].ts

    @pytest.mark.parametrize(
        ("failure", "expected"),
        [({"status": 429, "retry_after": 3}, RetryAfter), ({"error": "msg_too_long"}, BadRequest)],
    )
    async def test_refusals_are_not_checked_or_retried(
        self, failure: dict[str, Any], expected: type[Exception]
    ) -> None:
        async with FakeSlack() as slack:
            slack.fail("chat.postMessage", **failure)
            with pytest.raises(expected):
                await self._poster(slack).post(channel="C1", text="hi")
            assert len(slack.calls_of("chat.postMessage")) == 1
            assert not slack.calls_of("conversations.history")


class TestFind:
    """``MessagePoster.find``: what a replay asks before posting a chunk a dead process may have
    posted (real HTTP against the fake)."""

    async def test_our_message_with_that_text_since_then_is_found(self) -> None:
        async with FakeSlack() as slack:
            poster = TestMessagePoster()._poster(slack)
            other = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
            before = float(next_ts())
            posted = await other.chat_postMessage(channel="D1", text="the answer")
            found = await poster.find("D1", "the answer", thread_ts=None, since=before)
            assert found is not None and found["ts"] == posted["ts"]
            assert await poster.find("D1", "another text", thread_ts=None, since=before) is None
            after = float(posted["ts"]) + 1
            assert await poster.find("D1", "the answer", thread_ts=None, since=after) is None

    async def test_a_thread_is_looked_up_in_its_replies(self) -> None:
        async with FakeSlack() as slack:
            poster = TestMessagePoster()._poster(slack)
            before = float(next_ts())
            thread = await poster.post(channel="C1", text="parent")
            reply = await poster.post(channel="C1", text="in thread", thread_ts=thread["ts"])
            poster._known.clear()  # a new process knows none of them
            found = await poster.find("C1", "in thread", thread_ts=thread["ts"], since=before)
            assert found is not None and found["ts"] == reply["ts"]
            assert slack.calls_of("conversations.replies")

    async def test_a_failed_look_raises(self) -> None:
        async with FakeSlack() as slack:
            slack.fail("conversations.history", status=500)
            with pytest.raises(ChannelError):
                await TestMessagePoster()._poster(slack).find("D1", "x", thread_ts=None, since=0.0)


class TestSafeServerErrorRetryHandler:
    async def test_posts_are_not_retried_by_the_sdk_other_calls_are(self) -> None:
        async with FakeSlack() as slack:
            client = AsyncWebClient(
                token=slack.bot_token,
                base_url=slack.base_url,
                retry_handlers=[SafeServerErrorRetryHandler(max_retry_count=2)],
            )
            slack.fail("chat.postMessage", status=503)
            with pytest.raises(SlackApiError):
                await client.chat_postMessage(channel="C1", text="hi")
            assert len(slack.calls_of("chat.postMessage")) == 1
            slack.fail("conversations.history", status=503)
            await client.conversations_history(channel="C1")
            assert len(slack.calls_of("conversations.history")) == 2

    def test_method_names(self) -> None:
        assert api_method("https://slack.com/api/chat.postMessage") == "chat.postMessage"
        assert api_method("http://127.0.0.1:1/api/users.info?user=U1") == "users.info"
