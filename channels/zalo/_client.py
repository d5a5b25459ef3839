"""A small typed async client for the Zalo Bot API (``{base}/bot{token}/{method}``, JSON POST).

Retries, and why they never duplicate a message:

* ``RetryAfter`` (429) means the request was not accepted: always retried, after the delay.
* Methods without side effects worth guarding (``getMe``, ``sendChatAction``, the webhook
  methods) are retried on every 5xx and network error.
* ``sendMessage``/``sendPhoto`` are retried only when the platform cannot have acted: a connect
  failure, or 502/503/504 from the front proxy. A 500 or a read timeout after the request went out
  may have delivered the message, so it is raised instead of resent.
* ``getUpdates`` is never retried here: the polling loop owns its backoff.

The token is part of every URL, so nothing here logs or formats a URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from channels.errors import RetryAfter
from channels.zalo._errors import (
    ZaloError,
    ZaloNetworkError,
    ZaloServerError,
    raise_for_answer,
    translate_zalo_errors,
)
from channels.zalo._types import (
    BotInfo,
    SentMessage,
    WebhookInfo,
    ZaloUpdate,
    parse_bot_info,
    parse_sent_message,
    parse_updates,
    parse_webhook_info,
)

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://bot-api.zaloplatforms.com"
MAX_TEXT_CHARS = 2000
POLL_GRACE = 10.0  # seconds the HTTP read timeout exceeds the long-poll timeout


def _retryable(*, idempotent: bool) -> Callable[[BaseException], bool]:
    def check(exc: BaseException) -> bool:
        if isinstance(exc, RetryAfter):
            return True
        if isinstance(exc, ZaloServerError):
            return idempotent or exc.not_processed
        if isinstance(exc, ZaloNetworkError):
            return idempotent or not exc.request_sent
        return False

    return check


class ZaloBotClient:
    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        request_timeout: float = 10.0,
        attempts: int = 3,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not token:
            raise ValueError("a Zalo bot token is required")
        self._prefix = f"/bot{token}/"
        self._timeout = request_timeout
        self._attempts = max(1, attempts)
        self._backoff = wait_exponential_jitter(
            multiplier=backoff_initial, max=backoff_max, jitter=backoff_initial
        )
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(request_timeout),
            transport=transport,
            headers={"Accept": "application/json"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the API ---------------------------------------------------------------------------

    async def get_me(self) -> BotInfo:
        return parse_bot_info(await self.call("getMe", {}, idempotent=True))

    async def get_updates(self, wait: int = 30) -> list[ZaloUpdate]:
        """One long poll of up to ``wait`` seconds.

        Raises :class:`ZaloPollIdle` when it ends without an event (408).
        """
        result = await self.call(
            "getUpdates",
            {"timeout": str(wait)},
            retries=False,
            read_timeout=wait + POLL_GRACE,
        )
        return parse_updates(result)

    async def set_webhook(self, url: str, secret_token: str) -> WebhookInfo:
        result = await self.call(
            "setWebhook", {"url": url, "secret_token": secret_token}, idempotent=True
        )
        return parse_webhook_info(result)

    async def delete_webhook(self) -> WebhookInfo:
        return parse_webhook_info(await self.call("deleteWebhook", {}, idempotent=True))

    async def get_webhook_info(self) -> WebhookInfo:
        return parse_webhook_info(await self.call("getWebhookInfo", {}, idempotent=True))

    async def send_message(self, chat_id: str, text: str) -> SentMessage:
        if not 1 <= len(text) <= MAX_TEXT_CHARS:
            raise ValueError(f"Zalo text must be 1..{MAX_TEXT_CHARS} characters, got {len(text)}")
        result = await self.call("sendMessage", {"chat_id": chat_id, "text": text})
        return parse_sent_message(result)

    async def send_photo(self, chat_id: str, photo: str, caption: str | None = None) -> SentMessage:
        body: dict[str, Any] = {"chat_id": chat_id, "photo": photo}
        if caption:
            body["caption"] = caption[:MAX_TEXT_CHARS]
        return parse_sent_message(await self.call("sendPhoto", body))

    async def send_chat_action(self, chat_id: str, action: str = "typing") -> None:
        await self.call("sendChatAction", {"chat_id": chat_id, "action": action}, idempotent=True)

    # -- plumbing --------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        body: dict[str, Any],
        *,
        idempotent: bool = False,
        retries: bool = True,
        read_timeout: float | None = None,
    ) -> Any:
        """POST one method; returns ``result`` of an ``ok`` envelope, else raises."""
        if not retries:
            return await self._call_once(method, body, read_timeout)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            retry=retry_if_exception(_retryable(idempotent=idempotent)),
            before_sleep=lambda state: log.info(
                "zalo.retrying",
                method=method,
                attempt=state.attempt_number,
                error=str(state.outcome.exception()) if state.outcome else "",
            ),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._call_once(method, body, read_timeout)
        raise AssertionError("unreachable")

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryAfter):
            return exc.retry_after
        return float(self._backoff(state))

    async def _call_once(
        self, method: str, body: dict[str, Any], read_timeout: float | None
    ) -> Any:
        timeout = httpx.Timeout(self._timeout, read=read_timeout) if read_timeout else None
        with translate_zalo_errors(method):
            if timeout is None:
                response = await self._http.post(self._prefix + method, json=body)
            else:
                response = await self._http.post(self._prefix + method, json=body, timeout=timeout)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        envelope = raise_for_answer(method, response.status_code, payload, response.headers)
        return envelope.get("result")


__all__ = ["ZaloBotClient", "ZaloError"]
