"""Slack adapter pieces without the bot: errors, pacing, posting, normalization helpers, config."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import ConfigFileError, parse_config
from channels import BadRequest, ChannelError, ChatType, Forbidden, RetryAfter
from channels.slack import PostPacer, translate_slack_errors
from channels.slack._normalize import (
    chat_type_of,
    file_notes,
    is_from_bot,
    message_text,
    slack_emoji_name,
    strip_mention,
)
from channels.slack._posting import MessagePoster, SafeServerErrorRetryHandler, api_method
from tests.fakes.slack_events import next_ts
from tests.fakes.slack_server import FakeSlack


class TestTranslateErrorsWithRequest:
    """Real slack_sdk calls against the fake, so the SDK's own error objects are translated."""

    async def _call(self, slack: FakeSlack, token: str | None = None) -> None:
        client = AsyncWebClient(token=token or slack.bot_token, base_url=slack.base_url)
        with translate_slack_errors("chat.postMessage"):
            await client.chat_postMessage(channel="C1", text="hi")

    @pytest.mark.parametrize(
        ("failure", "expected", "match"),
        [
            ({"status": 429, "retry_after": 7}, RetryAfter, "ratelimited"),
            ({"error": "not_in_channel"}, Forbidden, "not_in_channel"),
            ({"error": "missing_scope"}, Forbidden, "missing_scope"),
            ({"status": 503}, ChannelError, "HTTP 503"),
            ({"error": "msg_too_long"}, BadRequest, "msg_too_long"),
        ],
    )
    async def test_slack_errors_become_channel_errors(
        self, failure: dict[str, Any], expected: type[Exception], match: str
    ) -> None:
        async with FakeSlack() as slack:
            slack.fail("chat.postMessage", **failure)
            with pytest.raises(expected, match=match) as caught:
                await self._call(slack)
        if isinstance(caught.value, RetryAfter):
            assert caught.value.retry_after == 7
        assert isinstance(caught.value.__cause__, SlackApiError)

    async def test_invalid_auth_is_forbidden(self) -> None:
        async with FakeSlack() as slack:
            with pytest.raises(Forbidden, match="invalid_auth"):
                await self._call(slack, token="xoxb-wrong")

    async def test_connection_failure_is_a_channel_error(self) -> None:
        client = AsyncWebClient(token="x", base_url="http://127.0.0.1:9/api/", timeout=2)
        with pytest.raises(ChannelError), translate_slack_errors("auth.test"):
            await client.auth_test()


class TestPostPacer:
    async def test_burst_passes_then_sustained_rate(self) -> None:
        pacer = PostPacer(per_second=20, burst=3)
        started = time.monotonic()
        waits = [await pacer.acquire("C1") for _ in range(6)]
        elapsed = time.monotonic() - started
        assert waits[:3] == [0.0, 0.0, 0.0]
        assert all(w > 0 for w in waits[3:])
        assert elapsed >= 3 / 20 * 0.9  # three extra posts at 20/s

    async def test_channels_are_paced_independently(self) -> None:
        pacer = PostPacer(per_second=1, burst=1)
        assert await pacer.acquire("C1") == 0.0
        assert await asyncio.wait_for(pacer.acquire("C2"), 0.5) == 0.0

    async def test_refills_over_time(self) -> None:
        now = [0.0]
        pacer = PostPacer(per_second=1, burst=2, clock=lambda: now[0])
        assert await pacer.acquire("C1") == 0.0
        assert await pacer.acquire("C1") == 0.0
        now[0] = 5.0  # long idle: the bucket is full again, not 5 tokens
        assert await pacer.acquire("C1") == 0.0
        assert await pacer.acquire("C1") == 0.0


class TestNormalize:
    def test_mentions_are_stripped(self) -> None:
        assert strip_mention("<@UBOT> /stop", "UBOT") == "/stop"
        assert strip_mention("hey <@UBOT|loopgate>: look", "UBOT") == "hey look"
        assert strip_mention("ask <@UOTHER>", "UBOT") == "ask <@UOTHER>"

    def test_chat_types(self) -> None:
        assert chat_type_of({"channel_type": "im"}, "D1") is ChatType.DIRECT
        assert chat_type_of({}, "D1") is ChatType.DIRECT  # app_mention has no channel_type
        assert chat_type_of({"channel_type": "mpim"}, "G1") is ChatType.GROUP
        assert chat_type_of({"channel_type": "channel"}, "C1") is ChatType.GROUP

    def test_files_become_notes(self) -> None:
        event = {"text": "", "files": [{"name": "a.png", "mimetype": "image/png"}]}
        assert file_notes(event) == [
            "[The user attached a file that can't be read here: a.png (image/png)]"
        ]
        assert message_text(event, "UBOT").startswith("[The user attached")

    def test_bots_are_recognised(self) -> None:
        assert is_from_bot({"bot_id": "B1"}, "UBOT", "BBOT")
        assert is_from_bot({"user": "UBOT"}, "UBOT", "BBOT")
        assert is_from_bot({"subtype": "bot_message"}, "UBOT", "BBOT")
        assert not is_from_bot({"user": "UALICE"}, "UBOT", "BBOT")

    def test_emoji_names(self) -> None:
        assert slack_emoji_name("👀") == "eyes"
        assert slack_emoji_name("👨‍💻") == "male-technologist"
        assert slack_emoji_name(":tada:") == "tada"


class TestConfig:
    def test_defaults(self) -> None:
        slack = parse_config({}, {}).channels.slack
        assert slack.reply_in_thread is True and slack.assistant_status is True
        assert slack.rate_limit != "off"
        assert (slack.rate_limit.per_second, slack.rate_limit.burst) == (1.0, 4)

    @pytest.mark.parametrize("value", [False, "off"])
    def test_rate_limit_off(self, value: object) -> None:
        config = parse_config({"channels": {"slack": {"rate_limit": value}}}, {})
        assert config.channels.slack.rate_limit == "off"

    def test_bad_rate_limit_names_the_key(self) -> None:
        with pytest.raises(ConfigFileError, match=r"channels\.slack\.rate_limit"):
            parse_config({"channels": {"slack": {"rate_limit": {"per_second": 0}}}}, {})

    def test_http_mode_requires_the_signing_secret(self) -> None:
        data = {"channels": {"slack": {"enabled": True, "bot_token": "x", "mode": "http"}}}
        with pytest.raises(ConfigFileError, match=r"channels\.slack\.signing_secret"):
            parse_config(data, {})


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
