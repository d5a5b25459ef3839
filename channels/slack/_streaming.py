"""An answer streamed into a Slack thread: ``chat.startStream`` / ``appendStream`` / ``stopStream``.

The bot hands :class:`SlackStream` its whole safe preview (markdown) each time; Slack's stream
only appends, so each update sends just what the preview added since the last one. A preview that
does not extend what is shown (rare: the bot rewrote its beginning) shows nothing more until the
end, where the final answer replaces the streamed text with ``chat.update``.

Limits (:mod:`channels.slack._splitting`): ``markdown_text`` takes 12,000 characters per call,
and an edited markdown message holds as many. A streamed message is kept under
:data:`MESSAGE_CHARS` (some margin for characters Slack counts differently), so the final
``chat.update`` fits too; a longer answer stops the message at a paragraph or line break and
continues in a new stream in the same thread, closing a code block left open and reopening it
there. Slack ends a stream by itself after about five minutes (``message_not_in_streaming_state``)
or when the user stops it (``stopped_by_user``): the text shown stays, and the rest continues in a
new message.

Only the first ``chat.startStream`` may fail quietly: nothing is shown yet, so it raises
:class:`~channels.protocol.StreamUnsupported` and the bot posts and edits instead. The channel
then stops offering streams where that failure will repeat (:func:`refusal_scope`). Later failures
never raise from :meth:`SlackStream.update`: a 429 is retried with the next preview (nothing was
appended), anything else ends the preview and the end puts the final text in place with
``chat.update``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from slack_sdk.errors import SlackApiError

from channels.errors import ChannelError, RetryAfter
from channels.protocol import StreamUnsupported
from channels.slack._errors import FATAL_AUTH_ERRORS, slack_error_code, translate_slack_errors
from channels.slack._ports import StreamHost
from channels.slack._posting import outcome_unknown
from channels.slack._splitting import (
    MAX_FENCE_LINE,
    MESSAGE_CHARS,
    RESERVE,
    fence_closer,
    fit,
    open_fence,
    split_for_messages,
)
from channels.slack._splitting import SLACK_MARKDOWN_LIMIT as SLACK_MARKDOWN_LIMIT
from channels.types import ChatRef, MessageRef

log = structlog.get_logger(__name__)

CLOSED = frozenset({"message_not_in_streaming_state", "stopped_by_user", "message_not_found"})
"""The stream is over on Slack's side (expired, stopped by the user, deleted): its text stays."""
APP_CANT_STREAM = frozenset({"unknown_method", "method_deprecated", "not_allowed_token_type"})
"""This token can't stream anywhere."""
PLACE_CANT_STREAM = frozenset(
    {"channel_type_not_supported", "restricted_action_non_threadable_channel"}
)
"""This conversation can't hold a stream."""
REQUEST_ERRORS = FATAL_AUTH_ERRORS | {
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_locked",
    "thread_not_found",
    "missing_recipient_user_id",
    "missing_recipient_team_id",
    "user_not_found",
    "team_not_found",
    "message_limit_exceeded",
    "messaging_processing_failed",
    "msg_too_long",
    "no_text",
    "invalid_arguments",
    "ratelimited",
    "rate_limited",
}
"""About this request only (where, for whom, how much): the next answer may stream."""

Scope = Literal["app", "workspace", "place", "request"]
_Outcome = Literal["ok", "closed", "later", "broken"]


def error_code(exc: BaseException) -> str:
    cause = exc.__cause__
    return slack_error_code(cause) if isinstance(cause, SlackApiError) else ""


def refusal_scope(exc: ChannelError) -> Scope:
    """Where a failed first ``chat.startStream`` will fail again.

    ``request``: a 429, a 5xx or a network failure, or an error about this request; ``place``:
    the conversation can't hold a stream; ``app``: the token can't stream at all; anything else
    (``feature_not_enabled``, ``missing_scope``, a code we don't know...) is taken as the
    workspace not letting this app stream.
    """
    cause = exc.__cause__
    if isinstance(exc, RetryAfter) or not isinstance(cause, SlackApiError):
        return "request"
    if outcome_unknown(cause):
        return "request"
    code = slack_error_code(cause)
    if code in APP_CANT_STREAM:
        return "app"
    if code in PLACE_CANT_STREAM:
        return "place"
    if code in REQUEST_ERRORS:
        return "request"
    return "workspace"


# -- the stream -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Message:
    ts: str
    body: str  # what it shows, as far as we know
    streaming: bool = True
    unsure: bool = False  # a call failed in a way that leaves what it shows unknown


class SlackStream:
    """Implements :class:`~channels.protocol.PlatformStream` for one answer in one thread."""

    def __init__(
        self,
        channel: StreamHost,
        chat: ChatRef,
        thread_ts: str,
        *,
        recipient_user: str = "",
        recipient_team: str = "",
    ) -> None:
        self.channel = channel
        self.client = channel.client
        self.chat = chat
        self.thread_ts = thread_ts
        self.recipient_user = recipient_user
        self.recipient_team = recipient_team
        self._messages: list[_Message] = []
        self._text = ""  # the latest preview that extended what is shown
        self._consumed = 0  # how much of ``_text`` the messages show
        self._opener = ""  # the code fence the next message reopens
        self._frozen = False  # a preview did not extend what is shown: nothing more until the end
        self._broken = False  # a failure: what is shown may be off, or no message can be added
        self._ended = False
        self._lock = asyncio.Lock()

    @property
    def messages(self) -> list[MessageRef]:
        return [MessageRef(chat=self.chat, message_id=m.ts) for m in self._messages]

    # -- PlatformStream ------------------------------------------------------------------------

    async def update(self, text: str) -> None:
        async with self._lock:
            if self._ended or self._frozen or self._broken:
                return
            if not text.startswith(self._text[: self._consumed]):
                self._frozen = True
                log.info("slack.stream_preview_rewritten", channel=self.chat.chat_id)
                return
            self._text = text
            try:
                await self._push(stopping=False)
            except StreamUnsupported:
                self._ended = True
                raise

    async def finish(self, text: str, *, reply_to: str | None = None) -> list[MessageRef]:
        """Stop with the final ``text``: only its new end is sent when it extends what was
        streamed, else the streamed messages are stopped and then edited to hold it."""
        async with self._lock:
            if self._ended:
                return self.messages
            self._ended = True
            if not self._messages:
                return []  # nothing shown: the bot sends the answer the usual way
            try:
                if not text.strip():
                    await self._remove()
                    return []
                shown = self._text[: self._consumed]
                if not (self._frozen or self._broken) and text.startswith(shown):
                    self._text = text
                    await self._push(stopping=True)
                if not self._in_place(text):
                    await self._rewrite(text)
                return self.messages
            finally:
                await self._clear_status()

    async def discard(self, *, marker: str | None = None) -> None:
        async with self._lock:
            if self._ended:
                return
            self._ended = True
            if not self._messages:
                return
            try:
                if marker is None:
                    await self._remove()
                else:
                    await self._mark(marker)
            finally:
                await self._clear_status()

    # -- showing the preview -------------------------------------------------------------------

    async def _push(self, *, stopping: bool) -> None:
        """Show ``_text`` past what is shown: append to the open message, start messages as the
        size limit (or a stream Slack ended) requires; ``stopping`` stops the last one."""
        while True:
            rest = self._text[self._consumed :]
            current = self._messages[-1] if self._messages else None
            if current is None or not current.streaming:
                blank = len(rest) - len(rest.lstrip("\n"))
                self._consumed += blank
                rest = rest[blank:]
                if not rest:
                    return
                prefix = self._opener + "\n" if self._opener else ""
                n = fit(rest, MESSAGE_CHARS - RESERVE - len(prefix), used=len(prefix))
                if not await self._start(prefix + rest[:n]):
                    return
                self._consumed += n
                self._opener = ""
                continue
            n = fit(rest, MESSAGE_CHARS - RESERVE - len(current.body), used=len(current.body))
            piece = rest[:n]
            if n == len(rest) and not stopping:
                if not piece:
                    return
                outcome = await self._append(current, piece)
                if outcome == "ok":
                    self._consumed += n
                if outcome != "closed":
                    return
                continue  # Slack ended that stream: the rest goes in a new message
            # The message ends here: with the answer (stopping), or full.
            opener = (open_fence(current.body + piece) or "") if n < len(rest) else ""
            if len(opener) > MAX_FENCE_LINE:
                opener = ""
            tail = piece + (fence_closer(current.body + piece, opener) if opener else "")
            outcome = await self._stop(current, tail)
            if outcome == "ok":
                self._consumed += n
                self._opener = opener
            elif outcome != "closed":
                return

    async def _start(self, body: str) -> bool:
        first = not self._messages
        kwargs: dict[str, Any] = {
            "channel": self.chat.chat_id,
            "thread_ts": self.thread_ts,
            "markdown_text": body,
        }
        if self.recipient_user:
            kwargs["recipient_user_id"] = self.recipient_user
        if self.recipient_team:
            kwargs["recipient_team_id"] = self.recipient_team
        try:
            await self.channel.pace(self.chat.chat_id)
            with translate_slack_errors("chat.startStream"):
                response = await self.client.chat_startStream(**kwargs)
        except ChannelError as exc:
            if first:
                self.channel.stream_refused(self, exc)
                raise StreamUnsupported(str(exc)) from exc
            log.warning("slack.stream_start_failed", channel=self.chat.chat_id, error=str(exc))
            self._broken = True
            return False
        ts = str(response.get("ts") or "")
        self._messages.append(_Message(ts, body))
        self.channel.stream_started(self.chat.chat_id, self.thread_ts, ts)
        return True

    async def _append(self, message: _Message, piece: str) -> _Outcome:
        try:
            with translate_slack_errors("chat.appendStream"):
                await self.client.chat_appendStream(
                    channel=self.chat.chat_id, ts=message.ts, markdown_text=piece
                )
        except ChannelError as exc:
            return self._failed("chat.appendStream", message, exc)
        message.body += piece
        return "ok"

    async def _stop(self, message: _Message, tail: str) -> _Outcome:
        try:
            with translate_slack_errors("chat.stopStream"):
                await self.client.chat_stopStream(
                    channel=self.chat.chat_id, ts=message.ts, markdown_text=tail or None
                )
        except ChannelError as exc:
            return self._failed("chat.stopStream", message, exc)
        message.body += tail
        message.streaming = False
        return "ok"

    def _failed(self, method: str, message: _Message, exc: ChannelError) -> _Outcome:
        code = error_code(exc)
        if code in CLOSED:
            # Slack ended the stream (or the message is gone): what it showed stays.
            log.info("slack.stream_closed", channel=self.chat.chat_id, method=method, error=code)
            message.streaming = False
            return "closed"
        if isinstance(exc, RetryAfter):
            # Refused, so nothing was added: the next update sends the same text again.
            log.info("slack.stream_rate_limited", channel=self.chat.chat_id, method=method)
            return "later"
        if outcome_unknown(exc.__cause__):
            message.unsure = True
        log.warning("slack.stream_failed", channel=self.chat.chat_id, method=method, error=str(exc))
        self._broken = True
        return "broken"

    # -- the end -------------------------------------------------------------------------------

    def _in_place(self, text: str) -> bool:
        """Whether the messages show exactly ``text``, all stopped."""
        return (
            not self._broken
            and self._consumed == len(self._text)
            and self._text == text
            and all(not m.streaming and not m.unsure for m in self._messages)
        )

    async def _rewrite(self, text: str) -> None:
        """Stop every message, then edit them to hold ``text`` (more messages if it needs more,
        the extra ones deleted if it needs fewer)."""
        for message in self._messages:
            await self._stop_quietly(message)
        parts = split_for_messages(text)
        for index, part in enumerate(parts):
            if index < len(self._messages):
                message = self._messages[index]
                if message.body != part or message.unsure:
                    await self._edit(message, part)
                continue
            if not await self._start(part):
                raise ChannelError(f"slack: part {index + 1} of the answer could not be posted")
            if await self._stop(self._messages[-1], "") not in ("ok", "closed"):
                raise ChannelError(f"slack: part {index + 1} of the answer did not stop streaming")
        for message in self._messages[len(parts) :]:
            if await self.channel.delete_message(MessageRef(chat=self.chat, message_id=message.ts)):
                self._messages.remove(message)

    async def _edit(self, message: _Message, text: str) -> None:
        with translate_slack_errors("chat.update"):
            await self.client.chat_update(
                channel=self.chat.chat_id, ts=message.ts, markdown_text=text
            )
        message.body = text
        message.unsure = False

    async def _stop_quietly(self, message: _Message) -> None:
        if not message.streaming:
            return
        try:
            with translate_slack_errors("chat.stopStream"):
                await self.client.chat_stopStream(channel=self.chat.chat_id, ts=message.ts)
        except ChannelError as exc:
            if error_code(exc) not in CLOSED:
                log.info("slack.stream_stop_failed", channel=self.chat.chat_id, error=str(exc))
        message.streaming = False

    async def _remove(self) -> None:
        """Stop and delete the streamed messages; one Slack won't delete stays as it is."""
        for message in self._messages:
            await self._stop_quietly(message)
        for message in list(self._messages):
            ref = MessageRef(chat=self.chat, message_id=message.ts)
            try:
                deleted = await self.channel.delete_message(ref)
            except ChannelError as exc:
                log.info("slack.stream_delete_failed", channel=self.chat.chat_id, error=str(exc))
                continue
            if deleted:
                self._messages.remove(message)

    async def _mark(self, marker: str) -> None:
        """Keep what is shown and end it with ``marker`` (after closing an open code block)."""
        for message in self._messages[:-1]:
            await self._stop_quietly(message)
        last = self._messages[-1]
        opener = open_fence(last.body)
        tail = (fence_closer(last.body, opener) + "\n" if opener else "") + marker
        if last.streaming:
            outcome = await self._stop(last, tail)
            if outcome == "ok":
                return
            await self._stop_quietly(last)
            if outcome != "closed":
                return  # what it shows is unknown, or Slack is refusing calls: leave it
        if last.unsure:
            return
        try:
            await self._edit(last, last.body + tail)
        except ChannelError as exc:
            log.info("slack.stream_mark_failed", channel=self.chat.chat_id, error=str(exc))

    async def _clear_status(self) -> None:
        await self.channel.status.clear(self.chat.chat_id, self.thread_ts)
