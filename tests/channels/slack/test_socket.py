"""The Socket Mode client against the fake Slack: hellos counted, unusable tokens stop it at
once, and reconnects back off."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient
from structlog.testing import capture_logs

from channels.slack._socket import FailFastSocketModeClient
from tests.fakes.slack_events import message_event
from tests.fakes.slack_server import FakeSlack
from tests.waiting import wait_until


def client(
    slack: FakeSlack, *, app_token: str | None = None, backoff: float = 0.05
) -> FailFastSocketModeClient:
    return FailFastSocketModeClient(
        app_token=app_token or slack.app_token,
        web_client=AsyncWebClient(base_url=slack.base_url),
        ping_interval=0.5,
        backoff_base=backoff,
    )


@asynccontextmanager
async def connected(slack: FakeSlack, **options: float) -> AsyncIterator[FailFastSocketModeClient]:
    socket = client(slack, **options)  # type: ignore[arg-type]
    try:
        await socket.open()
        await slack.wait_for(lambda: socket.connections == 1)
        yield socket
    finally:
        await socket.aclose()


async def test_a_hello_counts_a_connection_and_other_messages_do_not(slack: FakeSlack) -> None:
    async with connected(slack) as socket:
        assert socket.fatal_error is None
        received: list[str] = []

        async def listener(_: object, request: SocketModeRequest) -> None:
            received.append(request.envelope_id)

        socket.socket_mode_request_listeners.append(listener)
        # A key named "hello" early in the frame: looks like a hello to a quick scan, is not one.
        envelope = await slack.push({"hello": True, "event": message_event("hi")})
        await wait_until(lambda: received == [envelope])
        assert socket.connections == 1
        assert [c.method for c in slack.calls] == ["apps.connections.open"]


async def test_a_dropped_socket_is_reconnected_and_counted_again(slack: FakeSlack) -> None:
    async with connected(slack) as socket:
        await slack.drop_socket()
        await slack.wait_for(lambda: socket.connections == 2)
        assert slack.socket_connections == 2
        assert len(slack.calls_of("apps.connections.open")) == 2
        assert socket._attempts == 0  # the hello reset the backoff


@pytest.mark.parametrize("code", ["invalid_auth", "token_revoked", "missing_scope"])
async def test_an_unusable_token_stops_the_client_for_good(slack: FakeSlack, code: str) -> None:
    slack.fail("apps.connections.open", error=code)
    socket = client(slack)
    try:
        with capture_logs() as logs, pytest.raises(SlackApiError):
            await socket.issue_new_wss_url()
        assert socket.fatal_error == code
        assert socket.closed and not socket.auto_reconnect_enabled
        assert [e["error"] for e in logs if e["event"] == "slack.socket_auth_failed"] == [code]
        # The other reconnect loop gives up without asking Slack again.
        with pytest.raises(ConnectionError, match=f"Socket Mode stopped: {code}"):
            await socket.issue_new_wss_url()
        assert len(slack.calls_of("apps.connections.open")) == 1
    finally:
        await socket.aclose()


async def test_a_wrong_app_token_is_fatal(slack: FakeSlack) -> None:
    socket = client(slack, app_token="xapp-wrong")
    try:
        with pytest.raises(SlackApiError):
            await socket.issue_new_wss_url()
        assert socket.fatal_error == "invalid_auth"
    finally:
        await socket.aclose()


async def test_a_passing_failure_is_raised_but_not_fatal(slack: FakeSlack) -> None:
    slack.fail("apps.connections.open", error="internal_error")
    socket = client(slack)
    try:
        with pytest.raises(SlackApiError):
            await socket.issue_new_wss_url()
        assert socket.fatal_error is None and not socket.closed
        url = await socket.issue_new_wss_url()
        assert url.startswith(f"ws://127.0.0.1:{slack.port}/socket-mode")
    finally:
        await socket.aclose()


async def test_consecutive_attempts_back_off_exponentially(slack: FakeSlack) -> None:
    # Measures the waits themselves: with base 0.2 the second attempt waits 0.1-0.2 s and the
    # third 0.2-0.4 s (a random half to all of base * 2^(attempt-1)).
    for _ in range(2):
        slack.fail("apps.connections.open", error="internal_error")
    socket = client(slack, backoff=0.2)
    try:
        with pytest.raises(SlackApiError):
            await socket.issue_new_wss_url()  # the first attempt does not wait
        with pytest.raises(SlackApiError):
            await socket.issue_new_wss_url()
        await socket.issue_new_wss_url()
        first, second, third = (c.at for c in slack.calls_of("apps.connections.open"))
        assert 0.1 <= second - first < 0.2 + 0.15
        assert 0.2 <= third - second < 0.4 + 0.15
    finally:
        await socket.aclose()


async def test_the_first_attempt_does_not_wait(slack: FakeSlack) -> None:
    socket = client(slack, backoff=30.0)
    try:
        started = time.monotonic()
        await socket.issue_new_wss_url()
        assert time.monotonic() - started < 5  # far below the 15-30 s a backoff would take
    finally:
        await socket.aclose()
