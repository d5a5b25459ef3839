"""The Slack adapter: slack-bolt's async app behind Socket Mode or the HTTP Events API.

Inbound, bolt verifies (HTTP: v0 signature and 5-minute timestamp window), answers
``url_verification`` and drops our own events. A ``message`` / ``app_mention`` event is deduped,
normalized (:mod:`channels.slack.inbound`: sessions per thread, routing of ``/stop``) and handed
to the bot *before* bolt acknowledges it (``process_before_response``): the handler only stores
the message, so Slack still gets its ack well within 3 s, and an event is never acknowledged
unless the bot has it. When the bot does not take it (:class:`~channels.errors.NotAccepted`) the
listener returns a 503: over HTTP that is the answer, and Slack retries; in Socket Mode bolt's
``send_async_response`` sends nothing for a non-200, so the envelope stays unacknowledged and
Slack delivers it again. Either way the dedupe records of the event are forgotten, so the
redelivery is not skipped. Slash commands are acknowledged first (they carry no message to keep).

Outbound, posts are paced per channel (token bucket), 429 ``Retry-After`` is waited out by
slack_sdk's retry handler (the post was refused, so a retry can't duplicate it). A 5xx or a
timeout may hide a post that went through: :class:`~channels.slack.posting.MessagePoster` looks
for it in the conversation before posting again (other methods keep slack_sdk's 500/503 retry).
Progress is the assistant thread status ("is thinking…") where Slack allows it
(:mod:`channels.slack.status`).

Streamed answers: in a thread, Slack's own stream (``chat.startStream`` / ``appendStream`` /
``stopStream``, :mod:`channels.slack.streaming`); where Slack refuses it, the bot posts and edits
(``chat.update``, ``chat.delete``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from slack_bolt.adapter.socket_mode.async_internals import (
    run_async_bolt_app,
    send_async_response,
)
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from channels.errors import BadRequest, ChannelError, Forbidden, NotAccepted
from channels.intake import Intake
from channels.protocol import InboundHandler, PlatformStream, SeenStore
from channels.slack.errors import (
    FATAL_AUTH_ERRORS,
    slack_error_code,
    translate_slack_errors,
)
from channels.slack.inbound import COMMANDS, InboundNormalizer
from channels.slack.normalize import slack_emoji_name
from channels.slack.pacing import PostPacer
from channels.slack.posting import MessagePoster, SafeServerErrorRetryHandler
from channels.slack.recent import BoundedDict
from channels.slack.socket import FailFastSocketModeClient
from channels.slack.status import ThreadStatus
from channels.slack.streaming import SlackStream, error_code, refusal_scope
from channels.types import Capabilities, ChatRef, ChatType, MessageRef

log = structlog.get_logger(__name__)

MAX_CHARS = 4000  # Slack truncates longer text; 4,000 keeps one message one message


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """What the adapter needs from ``channels.slack`` (the adapter can't import bot config)."""

    bot_token: str
    app_token: str = ""
    signing_secret: str = ""
    api_base_url: str = "https://slack.com/api/"
    mode: Literal["socket", "http"] = "socket"
    reply_in_thread: bool = True
    pace_per_second: float | None = 1.0
    """Sustained posts per second per channel; None turns pacing off."""
    pace_burst: int = 4
    assistant_status: bool = True
    thinking_status: str = "is thinking…"
    tool_status: str = "is using {tool}…"  # {tool}: the tool's name
    status_ttl: float = 15.0
    """Backstop: a status not refreshed for this long is cleared."""
    ping_interval: float = 10.0
    reconnect_backoff: float = 1.0
    api_retries: int = 2
    """Retries of a 429 (after Retry-After) or a 500/503; of a post only once it is known that
    the failed attempt did not land."""
    post_retry_backoff: float = 0.5
    """First wait before checking on (and maybe repeating) a post that failed with 5xx/timeout."""
    name: str = "slack"


class SlackChannel:
    """Implements :class:`channels.Channel` and :class:`channels.WebhookReceiver`."""

    webhook_path = "/slack/events"

    def __init__(
        self,
        settings: SlackSettings,
        *,
        seen: SeenStore,
        web_client: AsyncWebClient | None = None,
    ) -> None:
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
            PostPacer(settings.pace_per_second, settings.pace_burst)
            if settings.pace_per_second
            else None
        )
        self.bot_user_id = ""
        self.bot_id = ""
        self.team_id = ""
        self._no_streams: set[str] = set()  # "*", "team:<id>", "channel:<id>"
        self.socket: FailFastSocketModeClient | None = None
        self._handler: InboundHandler | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._intake = Intake()
        self.inbound = InboundNormalizer(
            self.client, seen, name=self.name, reply_in_thread=settings.reply_in_thread
        )
        self.status = ThreadStatus(
            self.client,
            self._spawn,
            enabled=settings.assistant_status,
            thinking=settings.thinking_status,
            tool=settings.tool_status,
            ttl=settings.status_ttl,
        )
        self._admins: BoundedDict[str, tuple[bool, float]] = BoundedDict()
        self._signature = SignatureVerifier(settings.signing_secret)
        self.app = self._build_app()

    # -- lifecycle ---------------------------------------------------------------------------

    def _build_app(self) -> AsyncApp:
        http = self.settings.mode == "http"
        app = AsyncApp(
            client=self.client,
            signing_secret=self.settings.signing_secret,
            request_verification_enabled=http,
            # Listeners run before the ack is sent, so an event is acked only once stored.
            process_before_response=True,
            ignoring_self_events_enabled=True,
        )
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_mention_event)
        for name in ("assistant_thread_started", "assistant_thread_context_changed"):
            app.event(name)(self._on_ignored_event)
        for command in COMMANDS:
            app.command(command)(self._on_command)
        return app

    async def start(self, on_message: InboundHandler) -> None:
        self._handler = on_message
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
        socket.socket_mode_request_listeners.append(self._on_socket_request)  # type: ignore[arg-type]
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
        busy = await self._intake.close()
        if busy:
            log.warning("slack.events_unfinished", count=busy)
        if self.socket is not None:
            socket, self.socket = self.socket, None
            await socket.aclose()

    async def stop(self) -> None:
        await self.stop_receiving()
        self._handler = None
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

    # -- transports --------------------------------------------------------------------------

    async def handle_webhook(self, request: Request) -> Response:
        """``POST /slack/events``: bolt verifies, our listener hands the event over, then bolt
        answers (200, or 503 when the bot did not take it)."""
        if self.settings.mode != "http" or self._handler is None or not self._intake.open:
            return JSONResponse({"error": "slack http mode is not running"}, 503)
        body = await request.body()
        # Checked before bolt parses the body: an unsigned request costs no parsing.
        if not self._signature.is_valid_request(body, dict(request.headers)):
            log.warning("slack.webhook_rejected", reason="bad_signature", size=len(body))
            return JSONResponse({"error": "invalid signature"}, 401)
        bolt_request = AsyncBoltRequest(
            body=body.decode("utf-8", errors="replace"),
            query=dict(request.query_params),
            headers=dict(request.headers),
        )
        if retry := request.headers.get("x-slack-retry-num"):
            log.info(
                "slack.event_retry",
                retry=retry,
                reason=request.headers.get("x-slack-retry-reason", ""),
            )
        with self._intake.handing_over():
            response = await self.app.async_dispatch(bolt_request)
        return Response(
            content=response.body,
            status_code=response.status,
            headers=response.first_headers_without_set_cookie(),
        )

    async def _on_socket_request(
        self, client: FailFastSocketModeClient, req: SocketModeRequest
    ) -> None:
        if not self._intake.open:
            # Not acknowledged: Slack delivers the envelope again, to the next process.
            log.info("slack.envelope_refused", envelope_id=req.envelope_id, reason="stopping")
            return
        started = time.time()
        with self._intake.handing_over():
            response = await run_async_bolt_app(self.app, req)
            # Sends the ack for a 200 only: a 503 (not accepted) leaves the envelope unacked.
            await send_async_response(client, req, response, started)

    # -- bolt listeners: events are handed over before the ack, commands after ---------------

    async def _on_message_event(
        self, body: dict[str, Any], event: dict[str, Any]
    ) -> BoltResponse | None:
        return await self._accept(event, body, mention=False)

    async def _on_mention_event(
        self, body: dict[str, Any], event: dict[str, Any]
    ) -> BoltResponse | None:
        return await self._accept(event, body, mention=True)

    async def _on_ignored_event(self, event: dict[str, Any]) -> None:
        log.debug("slack.event_ignored", type=event.get("type"))

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        self._spawn(self._process_command(command), name="slack:command")

    # -- inbound -----------------------------------------------------------------------------

    async def _accept(
        self, event: dict[str, Any], body: dict[str, Any], *, mention: bool
    ) -> BoltResponse | None:
        """Hand the event over; a 503 for bolt to answer when the bot did not take it."""
        try:
            await self._process(event, body, mention=mention)
        except NotAccepted as exc:
            log.info("slack.not_accepted", event_id=body.get("event_id"), error=str(exc))
            return BoltResponse(status=503, body="")
        return None  # bolt acks with its default 200

    async def _process(self, event: dict[str, Any], body: dict[str, Any], *, mention: bool) -> None:
        """Raises only :class:`NotAccepted`; any other failure is logged and the event acked, so
        a bad event can't be redelivered forever."""
        try:
            msg = await self.inbound.event(event, body, mention=mention)
        except NotAccepted:
            raise
        except Exception:
            log.exception("slack.event_failed", event_id=body.get("event_id"))
            return
        if msg is None:
            return
        handler = self._handler
        try:
            if handler is None:
                raise NotAccepted("slack: not receiving")
            await handler(msg)
        except (NotAccepted, asyncio.CancelledError):
            # Cancelled: whether the bot stored it is unknown. If it did, its own dedupe key
            # catches the redelivery; ours must not hide it if it did not.
            await self.inbound.forget(msg)
            raise
        except Exception:
            log.exception("slack.event_failed", event_id=body.get("event_id"))

    async def _process_command(self, command: dict[str, Any]) -> None:
        msg = self.inbound.command(command)
        if msg is None or self._handler is None:
            return
        try:
            await self._handler(msg)
        except Exception:
            log.exception("slack.command_failed", command=msg.text)

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

    def stream_refused(self, stream: SlackStream, exc: ChannelError) -> None:
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
