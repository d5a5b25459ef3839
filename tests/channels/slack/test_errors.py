"""channels/slack/_errors.py: slack_sdk errors translated to channel errors (real HTTP)."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels import BadRequest, ChannelError, Forbidden, RetryAfter
from channels.slack import translate_slack_errors
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
