"""Posting a Slack message exactly once, across a 5xx or a timeout.

A 5xx or a timeout from ``chat.postMessage`` doesn't say whether Slack posted the message: it
may have stored it and failed afterwards. slack_sdk's server-error retry would then post it a
second time, so :class:`SafeServerErrorRetryHandler` keeps it away from posting methods, and
:class:`MessagePoster` retries them itself: after such a failure it waits (exponential backoff with
jitter), looks in the conversation for a message from our bot with exactly this text posted since
just before the first attempt (``conversations.replies`` in a thread, ``conversations.history``
otherwise; needs the ``*:history`` scopes) and posts again only if it isn't there. When it can't
look (the look fails too), it looks again at the next attempt instead of risking a duplicate.

A 429 is different: Slack refused the post, so slack_sdk's rate-limit handler waits out
``Retry-After`` and posts again; a 429 that outlasts it becomes :class:`~channels.RetryAfter`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncServerErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from channels.errors import ChannelError
from channels.slack._errors import slack_error_code, translate_slack_errors

log = structlog.get_logger(__name__)

# Methods that create or add something each time they are called: never repeated blindly (a
# stream's start posts a message, an append or a stop with text adds it again).
NOT_IDEMPOTENT = frozenset(
    {
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.meMessage",
        "chat.scheduleMessage",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    }
)
CLOCK_MARGIN = 2.0
"""Seconds looked back before the first attempt, in case our clock runs ahead of Slack's."""
CHECK_LIMIT = 200
KNOWN_POSTS = 5_000


def api_method(url: str) -> str:
    """``https://slack.com/api/chat.postMessage?x=1`` → ``chat.postMessage``."""
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


class SafeServerErrorRetryHandler(AsyncServerErrorRetryHandler):
    """slack_sdk's 500/503 retry, except for methods a repeat would duplicate."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if api_method(request.url) in NOT_IDEMPOTENT:
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


class Unconfirmed(ChannelError):
    """A post failed in a way that leaves open whether Slack posted it."""


def outcome_unknown(exc: BaseException | None) -> bool:
    """Whether a failed call may still have been carried out by Slack."""
    if isinstance(exc, SlackApiError):
        return exc.response is not None and exc.response.status_code >= 500
    # A timeout or a dropped connection: the request may have been read and acted on.
    return isinstance(exc, TimeoutError | aiohttp.ClientError)


@dataclass(slots=True)
class _Attempt:
    channel: str
    text: str
    thread_ts: str | None
    since: float
    posts: int = 0
    unsure: bool = False
    last: BaseException | None = None


class MessagePoster:
    """``chat.postMessage`` with retries that can't post the same message twice."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        attempts: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.clock = clock
        self._wait = wait_exponential_jitter(multiplier=backoff, max=max_backoff, jitter=backoff)
        self.bot_user_id = ""
        self.bot_id = ""
        # (channel, ts) of messages we know we posted: a lookup never mistakes them for the
        # one in question (the same text posted a moment ago, say).
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def post(self, **kwargs: Any) -> dict[str, Any]:
        """Post; returns the response data (``ts`` of the message)."""
        thread_ts = str(kwargs.get("thread_ts") or "") or None
        attempt = _Attempt(
            channel=str(kwargs["channel"]),
            text=str(kwargs["text"]),
            thread_ts=thread_ts,
            since=self.clock() - CLOCK_MARGIN,
        )
        retrying = AsyncRetrying(
            # One more round than posts: a last look after the last post's failure.
            stop=stop_after_attempt(self.attempts + 1),
            wait=self._wait,
            retry=retry_if_exception_type(Unconfirmed),
            before_sleep=self._log_retry,
            reraise=True,
        )
        result: dict[str, Any] = await retrying(self._attempt, attempt, kwargs)
        return result

    def remember(self, channel: str, ts: str) -> None:
        if not ts:
            return
        self._known[(channel, ts)] = None
        self._known.move_to_end((channel, ts))
        if len(self._known) > KNOWN_POSTS:
            self._known.popitem(last=False)

    async def _attempt(self, attempt: _Attempt, kwargs: dict[str, Any]) -> dict[str, Any]:
        if attempt.unsure:
            landed = await self._find(attempt)  # Unconfirmed (retried) when it can't look
            if landed is not None:
                log.info(
                    "slack.post_landed_despite_error",
                    channel=attempt.channel,
                    ts=landed["ts"],
                    error=str(attempt.last),
                )
                return landed
            attempt.unsure = False
            if attempt.posts >= self.attempts:
                raise ChannelError(
                    f"slack chat.postMessage: not posted after {attempt.posts} attempts "
                    f"({attempt.last})"
                ) from attempt.last
        attempt.posts += 1
        try:
            with translate_slack_errors("chat.postMessage"):
                response = await self.client.chat_postMessage(**kwargs)
        except ChannelError as exc:
            if not outcome_unknown(exc.__cause__):
                raise  # refused (4xx, 429 after Retry-After): nothing was posted
            attempt.unsure = True
            attempt.last = exc
            raise Unconfirmed(str(exc)) from exc.__cause__
        data = response.data if isinstance(response.data, dict) else {}
        self.remember(attempt.channel, str(data.get("ts") or ""))
        return data

    async def _find(self, attempt: _Attempt) -> dict[str, Any] | None:
        """Our message with this text in the conversation since the first attempt, if any."""
        try:
            return await self.find(
                attempt.channel, attempt.text, thread_ts=attempt.thread_ts, since=attempt.since
            )
        except ChannelError as exc:
            raise Unconfirmed(f"{exc} (while checking an unconfirmed post)") from exc

    async def find(
        self, channel: str, text: str, *, thread_ts: str | None, since: float
    ) -> dict[str, Any] | None:
        """A message of our bot with exactly ``text`` posted in the conversation (the thread
        ``thread_ts``) after ``since`` (a Unix time) and not known to be another post; None
        when there is none. Raises :class:`ChannelError` when it can't look."""
        oldest = f"{since:.6f}"
        method = "conversations.replies" if thread_ts else "conversations.history"
        try:
            with translate_slack_errors(method):
                if thread_ts:
                    response = await self.client.conversations_replies(
                        channel=channel, ts=thread_ts, oldest=oldest, limit=CHECK_LIMIT
                    )
                else:
                    response = await self.client.conversations_history(
                        channel=channel, oldest=oldest, limit=CHECK_LIMIT
                    )
        except ChannelError as exc:
            cause = exc.__cause__
            if isinstance(cause, SlackApiError) and slack_error_code(cause) == "thread_not_found":
                return None  # nothing in that thread, so not our message either
            log.warning(
                "slack.post_check_failed",
                method=method,
                channel=channel,
                error=str(exc),
                hint="the bot needs the *:history scopes to retry posts safely",
            )
            raise
        for message in response.get("messages") or []:
            if not isinstance(message, dict) or not self._is_ours(message):
                continue
            ts = str(message.get("ts") or "")
            if (channel, ts) in self._known or str(message.get("text")) != text:
                continue
            try:
                newer = float(ts) > since
            except ValueError:
                continue
            if newer:
                self.remember(channel, ts)
                return {"ok": True, "channel": channel, "ts": ts, "message": message}
        return None

    def _is_ours(self, message: dict[str, Any]) -> bool:
        if self.bot_user_id and message.get("user") == self.bot_user_id:
            return True
        return bool(self.bot_id) and message.get("bot_id") == self.bot_id

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.info(
            "slack.post_retry", attempt=state.attempt_number, wait=round(wait, 2), error=str(error)
        )
