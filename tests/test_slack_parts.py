"""Slack adapter pieces without the bot: errors, pacing, normalization helpers, config."""

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
from channels.slack.normalize import (
    chat_type_of,
    file_notes,
    is_from_bot,
    message_text,
    slack_emoji_name,
    strip_mention,
)
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
