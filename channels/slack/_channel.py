"""The Slack adapter: slack-bolt's async app behind Socket Mode or the HTTP Events API.

Inbound (:mod:`channels.slack._receiving`), an event is handed to the bot before bolt
acknowledges it, so an event is never acknowledged unless the bot has it; one the bot did not take
(:class:`~channels.errors.NotAccepted`) is delivered again by Slack.

Outbound, posts are paced per channel (token bucket), 429 ``Retry-After`` is waited out by
slack_sdk's retry handler (the post was refused, so a retry can't duplicate it). A 5xx or a
timeout may hide a post that went through: :class:`~channels.slack._posting.MessagePoster` looks
for it in the conversation before posting again (other methods keep slack_sdk's 500/503 retry).
Progress is the assistant thread status ("is thinking…") where Slack allows it
(:mod:`channels.slack._status`).

Streamed answers: in a thread, Slack's own stream (``chat.startStream`` / ``appendStream`` /
``stopStream``, :mod:`channels.slack._streaming`); where Slack refuses it, the bot posts and edits
(``chat.update``, ``chat.delete``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from contextlib import suppress
from pathlib import Path
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import Response

from channels.errors import BadRequest, ChannelError, Forbidden
from channels.protocol import InboundHandler, PaceStore, PlatformStream, SeenStore, SentFile
from channels.slack._errors import (
    FATAL_AUTH_ERRORS,
    slack_error_code,
    translate_slack_errors,
)
from channels.slack._files import upload_file
from channels.slack._inbound import InboundNormalizer
from channels.slack._normalize import slack_emoji_name
from channels.slack._pacing import PostPacer
from channels.slack._ports import StreamTarget
from channels.slack._posting import CLOCK_MARGIN, MessagePoster, SafeServerErrorRetryHandler
from channels.slack._receiving import EventReceiver
from channels.slack._recent import BoundedDict
from channels.slack._settings import SlackSettings
from channels.slack._socket import FailFastSocketModeClient
from channels.slack._status import ThreadStatus
from channels.slack._streaming import SlackStream, error_code, refusal_scope
from channels.types import Capabilities, ChatRef, ChatType, MessageRef

log = structlog.get_logger(__name__)

MAX_CHARS = 4000  # Slack truncates longer text; 4,000 keeps one message one message


class SlackChannel:
    """Implements :class:`channels.Channel` and :class:`channels.WebhookReceiver`."""

    webhook_path = "/slack/events"

    def __init__(
        self,
        settings: SlackSettings,
        *,
        seen: SeenStore,
        web_client: AsyncWebClient | None = None,
        pace_store: PaceStore | None = None,
    ) -> None:
        """``pace_store``: the posting budgets shared with the bot's other processes."""
        self.settings = settings
        self.name = settings.name
        self.capabilities = Capabilities(
            max_chars=MAX_CHARS,
            formatting="mrkdwn",
            typing=settings.assistant_status,
            reactions=True,
            threads=True,
            edits=True,
        )
        self.seen = seen
        self.client = web_client or AsyncWebClient(
            token=settings.bot_token,
            base_url=settings.api_base_url,
            retry_handlers=[
                AsyncRateLimitErrorRetryHandler(max_retry_count=settings.api_retries),
                SafeServerErrorRetryHandler(max_retry_count=settings.api_retries),
            ],
        )
        self.poster = MessagePoster(
            self.client, attempts=1 + settings.api_retries, backoff=settings.post_retry_backoff
        )
        self.pacer = (
            PostPacer(
                settings.pace_per_second,
                settings.pace_burst,
                shared=pace_store,
                channel=settings.name,
            )
            if settings.pace_per_second
            else None
        )
        self.bot_user_id = ""
        self.bot_id = ""
        self.team_id = ""
        self._no_streams: set[str] = set()  # "*", "team:<id>", "channel:<id>"
        self.socket: FailFastSocketModeClient | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.inbound = InboundNormalizer(
            self.client, seen, name=self.name, reply_in_thread=settings.reply_in_thread
        )
        self.receiver = EventReceiver(settings, self.client, self.inbound, self._spawn)
        self.app = self.receiver.app
        self.status = ThreadStatus(
            self.client,
            self._spawn,
            enabled=settings.assistant_status,
            thinking=settings.thinking_status,
            tool=settings.tool_status,
            ttl=settings.status_ttl,
        )
        self._admins: BoundedDict[str, tuple[bool, float]] = BoundedDict()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        self.receiver.handler = on_message
        await self._authenticate()
        if self.settings.mode == "socket":
            await self._start_socket()
        log.info(
            "slack.started", mode=self.settings.mode, bot_user_id=self.bot_user_id, bot=self.bot_id
        )

    async def _authenticate(self) -> None:
        """auth.test once: learn our ids, and fail fast on a token that can't work."""
        try:
            auth = await self.client.auth_test()
        except SlackApiError as exc:
            code = slack_error_code(exc)
            if code in FATAL_AUTH_ERRORS:
                log.error(
                    "slack.auth_failed",
                    error=code,
                    hint="check channels.slack.bot_token (xoxb-…) and that the app is installed",
                )
                raise Forbidden(
                    f"slack auth.test: {code} (check channels.slack.bot_token)"
                ) from exc
            raise ChannelError(f"slack auth.test: {code}") from exc
        self.bot_user_id = str(auth.get("user_id") or "")
        self.bot_id = str(auth.get("bot_id") or "")
        self.team_id = str(auth.get("team_id") or "")
        self.poster.bot_user_id, self.poster.bot_id = self.bot_user_id, self.bot_id
        self.inbound.bot_user_id, self.inbound.bot_id = self.bot_user_id, self.bot_id

    async def _start_socket(self) -> None:
        socket = FailFastSocketModeClient(
            app_token=self.settings.app_token,
            web_client=AsyncWebClient(
                base_url=self.settings.api_base_url,
                retry_handlers=self.client.retry_handlers,
            ),
            ping_interval=self.settings.ping_interval,
            backoff_base=self.settings.reconnect_backoff,
        )
        socket.socket_mode_request_listeners.append(self.receiver.on_socket_request)  # type: ignore[arg-type]
        self.socket = socket
        # The first URL is fetched here, not in the background, so a bad app token stops the
        # start-up with a clear error instead of a silent retry loop.
        try:
            socket.wss_uri = await socket.issue_new_wss_url()
        except SlackApiError as exc:
            code = slack_error_code(exc)
            await socket.aclose()
            if socket.fatal_error:
                raise Forbidden(
                    f"slack apps.connections.open: {code} (check channels.slack.app_token)"
                ) from exc
            raise ChannelError(f"slack apps.connections.open: {code}") from exc
        self._spawn(socket.open(), name="slack:socket-connect")

    async def stop_receiving(self) -> None:
        """Refuse new events (HTTP: 503; Socket Mode: not acked, so Slack delivers them again),
        let those being handed over finish and be acked, then close the socket. Sending keeps
        working: it is the Web API, not the socket."""
        busy = await self.receiver.intake.close()
        if busy:
            log.warning("slack.events_unfinished", count=busy)
        if self.socket is not None:
            socket, self.socket = self.socket, None
            await socket.aclose()

    async def stop(self) -> None:
        await self.stop_receiving()
        self.receiver.handler = None
        self.status.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    def _spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- receiving: channels.slack._receiving ------------------------------------------------

    async def handle_webhook(self, request: Request) -> Response:
        """``POST /slack/events``: bolt verifies, our listener hands the event over, then bolt
        answers (200, or 503 when the bot did not take it)."""
        return await self.receiver.handle_webhook(request)

    # -- outbound ----------------------------------------------------------------------------

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        thread_ts = chat.thread_id
        if thread_ts is None and reply_to and chat.chat_type is ChatType.GROUP:
            thread_ts = reply_to if self.settings.reply_in_thread else None
        await self.pace(chat.chat_id)
        kwargs: dict[str, Any] = {"channel": chat.chat_id, "text": text, "mrkdwn": True}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        response = await self.poster.post(**kwargs)
        if thread_ts:
            self.inbound.join_thread(chat.chat_id, thread_ts)
            self.status.replied(chat.chat_id, thread_ts)
        return MessageRef(chat=chat, message_id=str(response.get("ts") or ""))

    async def send_file(
        self,
        chat: ChatRef,
        path: Path,
        *,
        name: str,
        mime: str,
        caption: str = "",
        reply_to: str | None = None,
    ) -> SentFile:
        """:class:`~channels.protocol.FileSending`: ``files_upload_v2`` where :meth:`send_text`
        would post (the same thread), the caption as its comment (:mod:`channels.slack._files`)."""
        thread_ts = chat.thread_id
        if thread_ts is None and reply_to and chat.chat_type is ChatType.GROUP:
            thread_ts = reply_to if self.settings.reply_in_thread else None
        await self.pace(chat.chat_id)
        sent = await upload_file(
            self.client, chat, path, name=name, mime=mime, caption=caption, thread_ts=thread_ts
        )
        if thread_ts:
            self.inbound.join_thread(chat.chat_id, thread_ts)
        return sent

    async def find_sent(
        self, chat: ChatRef, text: str, *, since: float, reply_to: str | None = None
    ) -> MessageRef | None:
        """:class:`~channels.protocol.SentLookup`: our message with ``text`` where
        :meth:`send_text` (same ``reply_to``) would have posted it, since ``since``."""
        thread_ts = chat.thread_id
        if thread_ts is None and reply_to and chat.chat_type is ChatType.GROUP:
            thread_ts = reply_to if self.settings.reply_in_thread else None
        found = await self.poster.find(
            chat.chat_id, text, thread_ts=thread_ts, since=since - CLOCK_MARGIN
        )
        return None if found is None else MessageRef(chat=chat, message_id=str(found["ts"]))

    async def pace(self, channel_id: str) -> None:
        """Wait for a post slot in the channel (a new message: a post or a stream)."""
        if self.pacer is not None:
            waited = await self.pacer.acquire(channel_id)
            if waited:
                log.info("slack.post_paced", channel=channel_id, waited=round(waited, 3))

    # -- editing and streaming: MessageEditor, NativeStreaming ---------------------------------

    async def edit_text(self, message: MessageRef, text: str) -> None:
        """``chat.update`` with mrkdwn text, like :meth:`send_text`'s. A 429 is waited out by
        the client's retry, then raised as :class:`~channels.errors.RetryAfter`."""
        with translate_slack_errors("chat.update"):
            await self.client.chat_update(
                channel=message.chat.chat_id, ts=message.message_id, text=text
            )

    async def delete_message(self, message: MessageRef) -> bool:
        """``chat.delete``; False when Slack refuses (``cant_delete_message``,
        ``message_not_found``...). A 429, a 5xx or a network failure raises."""
        try:
            with translate_slack_errors("chat.delete"):
                await self.client.chat_delete(channel=message.chat.chat_id, ts=message.message_id)
        except (BadRequest, Forbidden) as exc:
            log.info("slack.delete_refused", channel=message.chat.chat_id, error=str(exc))
            return False
        return True

    def open_stream(self, chat: ChatRef, *, reply_to: str | None = None) -> PlatformStream | None:
        """A native stream for an answer in a thread (where :meth:`send_text` would answer in
        one); None outside threads, where Slack has refused streams, and in a channel whose
        asker is unknown (a stream there must name its recipient)."""
        thread_ts = chat.thread_id
        if (
            thread_ts is None
            and reply_to
            and chat.chat_type is ChatType.GROUP
            and self.settings.reply_in_thread
        ):
            thread_ts = reply_to
        if not thread_ts:
            return None
        user, team = self.inbound.asker(chat.chat_id, reply_to, thread_ts)
        team = team or self.team_id
        if {"*", f"team:{team}", f"channel:{chat.chat_id}"} & self._no_streams:
            return None
        if chat.chat_type is ChatType.GROUP and not (user and team):
            return None
        return SlackStream(self, chat, thread_ts, recipient_user=user, recipient_team=team)

    def stream_refused(self, stream: StreamTarget, exc: ChannelError) -> None:
        """The first ``chat.startStream`` of ``stream`` failed: stop offering streams where that
        will happen again."""
        scope = refusal_scope(exc)
        key = {
            "app": "*",
            "workspace": f"team:{stream.recipient_team or self.team_id}",
            "place": f"channel:{stream.chat.chat_id}",
            "request": "",
        }[scope]
        if key:
            self._no_streams.add(key)
        log.info(
            "slack.stream_refused",
            channel=stream.chat.chat_id,
            error=error_code(exc) or str(exc),
            scope=scope,
        )

    def stream_started(self, channel_id: str, thread_ts: str, ts: str) -> None:
        """A streamed message is in the thread: a reply like a post (see :meth:`send_text`)."""
        self.poster.remember(channel_id, ts)
        self.inbound.join_thread(channel_id, thread_ts)
        self.status.replied(channel_id, thread_ts)

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        self.status.reaction_added(message.chat, emoji)
        try:
            with translate_slack_errors("reactions.add"):
                await self.client.reactions_add(
                    channel=message.chat.chat_id,
                    timestamp=message.message_id,
                    name=slack_emoji_name(emoji),
                )
        except ChannelError as exc:
            if "already_reacted" not in str(exc):
                raise

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None:
        self.status.reaction_removed(message.chat)
        try:
            with translate_slack_errors("reactions.remove"):
                await self.client.reactions_remove(
                    channel=message.chat.chat_id,
                    timestamp=message.message_id,
                    name=slack_emoji_name(emoji),
                )
        except ChannelError as exc:
            if "no_reaction" not in str(exc):
                raise

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        """Workspace admins and owners count as admins of every channel (cached 5 minutes)."""
        cached = self._admins.get(user_id)
        if cached is not None and time.monotonic() - cached[1] < 300:
            return cached[0]
        with translate_slack_errors("users.info"):
            info = await self.client.users_info(user=user_id)
        user = info.get("user") or {}
        admin = bool(user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
        self._admins[user_id] = (admin, time.monotonic())
        return admin

    # -- progress: assistant thread status ------------------------------------------------------

    async def set_typing(self, chat: ChatRef) -> None:
        """Slack has no bot typing; an assistant thread shows "is thinking…" instead."""
        await self.status.refresh(chat)

    def show_progress(self, message: MessageRef, tool: str | None, *, helpers: int = 0) -> None:
        """ "is thinking…" / "is using read_file…" / "is waiting for 2 helpers…" in an
        assistant thread that shows a status."""
        self.status.show_progress(message.chat, tool, helpers=helpers)
