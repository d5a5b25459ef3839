"""Socket Mode transport: slack_sdk's aiohttp client with fail-fast auth and reconnect backoff.

slack_sdk already reconnects when the server closes the socket or pings go unanswered for four
intervals (a dead socket). Two things are added here: an unusable token (``invalid_auth``,
``token_revoked``...) stops the client with one clear log line instead of retrying forever, and
consecutive reconnects back off exponentially instead of hammering ``apps.connections.open``.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient

from channels.slack._errors import FATAL_AUTH_ERRORS, slack_error_code

log = structlog.get_logger(__name__)

BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0


class FailFastSocketModeClient(SocketModeClient):
    """Set ``fatal_error`` and close itself when the app token can't be used."""

    def __init__(self, *args: Any, backoff_base: float = BACKOFF_BASE, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fatal_error: str | None = None
        self.backoff_base = backoff_base
        self.connections = 0  # successful hellos, for logs and tests
        self._attempts = 0  # URL requests since the last hello
        self.on_message_listeners.append(self._on_raw_message)

    async def issue_new_wss_url(self) -> str:
        if self._attempts:
            delay = min(BACKOFF_CAP, self.backoff_base * 2 ** (self._attempts - 1))
            delay *= 0.5 + random.random() / 2
            log.info("slack.socket_reconnect_backoff", attempt=self._attempts, wait=round(delay, 2))
            await asyncio.sleep(delay)
        # The SDK reconnects from two loops at once (receiver and monitor): the other one may have
        # found the token unusable while this one waited.
        if self.fatal_error is not None:
            raise ConnectionError(f"Socket Mode stopped: {self.fatal_error}")
        self._attempts += 1
        try:
            url: str = await super().issue_new_wss_url()
        except SlackApiError as exc:
            code = slack_error_code(exc)
            if code in FATAL_AUTH_ERRORS or code == "missing_scope":
                self.fail(code)
            raise
        return url

    async def open(self) -> None:
        """Connect (reconnecting until closed); typed wrapper of the SDK's ``connect``."""
        await self.connect()  # type: ignore[no-untyped-call]

    async def aclose(self) -> None:
        await self.close()  # type: ignore[no-untyped-call]

    def fail(self, code: str) -> None:
        self.fatal_error = code
        # ``closed`` ends the SDK's connect/reconnect loops; close() releases the sockets.
        self.closed = True
        self.auto_reconnect_enabled = False
        log.error(
            "slack.socket_auth_failed",
            error=code,
            hint="check channels.slack.app_token (xapp-…, scope connections:write) and "
            "that Socket Mode is enabled for the app; not reconnecting",
        )

    async def _on_raw_message(self, message: Any) -> None:
        data = getattr(message, "data", None)
        if not isinstance(data, str) or '"hello"' not in data[:100]:
            return
        try:
            kind = json.loads(data).get("type")
        except (ValueError, AttributeError):
            return
        if kind == "hello":
            self._attempts = 0
            self.connections += 1
            log.info("slack.socket_connected", connections=self.connections)
