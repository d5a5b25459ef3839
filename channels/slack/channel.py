"""The Slack adapter: slack-bolt's async app behind Socket Mode or the HTTP Events API.

Inbound, bolt verifies (HTTP: v0 signature and 5-minute timestamp window), answers
``url_verification``, drops our own events and acknowledges at once; our listener only starts a
task, so Slack gets its ack well within 3 s whatever the run does. The task dedupes on
``event_id`` (Slack retries) and on ``channel:ts`` (the ``message`` + ``app_mention`` pair of one
post) through the persistent :class:`~channels.protocol.SeenStore`, then normalizes.

Sessions: a DM is one conversation; in a channel each thread is its own session
(``ChatRef.thread_id`` = ``thread_ts``), and with ``reply_in_thread`` a top-level mention opens a
thread for its answer. A top-level ``/stop`` in a channel is routed to the sender's latest thread
there, because that is where the run it means lives.

Outbound, posts are paced per channel (token bucket), 429 ``Retry-After`` is waited out by
slack_sdk's retry handler (the post was refused, so a retry can't duplicate it). A 5xx or a
timeout may hide a post that went through: :class:`~channels.slack.posting.MessagePoster` looks
for it in the conversation before posting again (other methods keep slack_sdk's 500/503 retry).
Progress is the assistant thread status ("is thinking…") where Slack allows it, cleared when the
run's status reaction is cleared (or, as a backstop, when typing refreshes stop).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Coroutine
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import structlog
from slack_bolt.adapter.socket_mode.async_internals import (
    run_async_bolt_app,
    send_async_response,
)
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from channels.errors import ChannelError, Forbidden
from channels.protocol import InboundHandler, SeenStore
from channels.slack.errors import (
    FATAL_AUTH_ERRORS,
    slack_error_code,
    translate_slack_errors,
)
from channels.slack.normalize import (
    EDIT_SUBTYPES,
    TERMINAL_EMOJI,
    USER_SUBTYPES,
    chat_type_of,
    is_from_bot,
    mentions,
    message_text,
    slack_emoji_name,
)
from channels.slack.pacing import PostPacer
from channels.slack.posting import MessagePoster, SafeServerErrorRetryHandler
from channels.slack.socket import FailFastSocketModeClient
from channels.types import Capabilities, ChatRef, ChatType, InboundMessage, MessageRef, Sender

log = structlog.get_logger(__name__)
K = TypeVar("K")
V = TypeVar("V")

MAX_CHARS = 4000  # Slack truncates longer text; 4,000 keeps one message one message
STATUS_GRACE = 0.3  # a removed reaction followed by no new one within this is the run's end
THREAD_FETCH_LIMIT = 50
COMMANDS = ("/stop", "/stopall")
RECENT_KEYS = 20_000  # in-memory dedupe window (events and posts)


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


@dataclass(slots=True)
class _Status:
    text: str
    expiry: asyncio.Task[None] | None = None
    pending_clear: asyncio.Task[None] | None = None


THREAD_CONTEXT_CHARS = 500


class _Bounded(OrderedDict[K, V]):
    """A dict that forgets its least recently written entries beyond ``limit``."""

    def __init__(self, limit: int = RECENT_KEYS) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


class _RecentKeys:
    """Bounded memory of recently seen keys (insertion order = age)."""

    def __init__(self, limit: int = RECENT_KEYS) -> None:
        self.limit = limit
        self._keys: OrderedDict[str, None] = OrderedDict()

    def seen(self, key: str) -> bool:
        if key in self._keys:
            return True
        self._keys[key] = None
        if len(self._keys) > self.limit:
            self._keys.popitem(last=False)
        return False


def _thread_key(chat: ChatRef) -> tuple[str, str] | None:
    return (chat.chat_id, chat.thread_id) if chat.thread_id else None


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
        self.socket: FailFastSocketModeClient | None = None
        self._handler: InboundHandler | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._statuses: dict[tuple[str, str], _Status] = {}
        self._status_off: _Bounded[tuple[str, str], bool] = _Bounded()
        self._status_disabled = not settings.assistant_status
        self._threads: _Bounded[tuple[str, str], bool] = _Bounded()  # threads we take part in
        self._latest_thread: _Bounded[tuple[str, str], str] = _Bounded()  # (channel, user) → ts
        self._admins: _Bounded[str, tuple[bool, float]] = _Bounded()
        self._recent = _RecentKeys()
        self.app = self._build_app()

    # -- lifecycle ---------------------------------------------------------------------------

    def _build_app(self) -> AsyncApp:
        http = self.settings.mode == "http"
        app = AsyncApp(
            client=self.client,
            signing_secret=self.settings.signing_secret,
            request_verification_enabled=http,
            process_before_response=False,
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
        self.poster.bot_user_id, self.poster.bot_id = self.bot_user_id, self.bot_id

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

    async def stop(self) -> None:
        self._handler = None
        if self.socket is not None:
            socket, self.socket = self.socket, None
            await socket.aclose()
        for status in self._statuses.values():
            for task in (status.expiry, status.pending_clear):
                if task is not None:
                    task.cancel()
        self._statuses.clear()
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
        """``POST /slack/events``: bolt verifies and acks; the work runs in a task."""
        if self.settings.mode != "http" or self._handler is None:
            return JSONResponse({"error": "slack http mode is not running"}, 503)
        body = await request.body()
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
        response = await self.app.async_dispatch(bolt_request)
        return Response(
            content=response.body,
            status_code=response.status,
            headers=response.first_headers_without_set_cookie(),
        )

    async def _on_socket_request(
        self, client: FailFastSocketModeClient, req: SocketModeRequest
    ) -> None:
        started = time.time()
        response = await run_async_bolt_app(self.app, req)
        await send_async_response(client, req, response, started)

    # -- bolt listeners: return at once, the work happens in a task ----------------------------

    async def _on_message_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        self._spawn(self._process(event, body, mention=False), name="slack:event")

    async def _on_mention_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        self._spawn(self._process(event, body, mention=True), name="slack:event")

    async def _on_ignored_event(self, event: dict[str, Any]) -> None:
        log.debug("slack.event_ignored", type=event.get("type"))

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        self._spawn(self._process_command(command), name="slack:command")

    # -- inbound -----------------------------------------------------------------------------

    async def _process(self, event: dict[str, Any], body: dict[str, Any], *, mention: bool) -> None:
        try:
            msg = await self._normalize(event, body, mention=mention)
            if msg is not None and self._handler is not None:
                await self._handler(msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("slack.event_failed", event_id=body.get("event_id"))

    async def _normalize(
        self, event: dict[str, Any], body: dict[str, Any], *, mention: bool
    ) -> InboundMessage | None:
        subtype = event.get("subtype")
        channel_id = str(event.get("channel") or "")
        if subtype in EDIT_SUBTYPES:
            # An edit is not a new question; answering it again would surprise more than help.
            log.info("slack.edit_ignored", subtype=subtype, channel=channel_id)
            return None
        if subtype not in USER_SUBTYPES or is_from_bot(event, self.bot_user_id, self.bot_id):
            log.debug("slack.event_skipped", subtype=subtype, bot=bool(event.get("bot_id")))
            return None
        user, ts = str(event.get("user") or ""), str(event.get("ts") or "")
        if not user or not channel_id or not ts:
            return None
        event_id = str(body.get("event_id") or "")
        # Retries repeat the event_id; the message + app_mention pair of one post share
        # channel:ts. Memory answers the common case at no cost; the persisted event_id and the
        # gateway's persisted ``slack:<channel>:<ts>`` key make a restart no replay.
        post_key = f"{channel_id}:{ts}"
        repeated_event = bool(event_id) and self._recent.seen(f"event:{event_id}")
        if repeated_event or self._recent.seen(f"post:{post_key}"):
            log.info("slack.duplicate", event_id=event_id, post=post_key)
            return None
        if event_id and await self.seen.seen(f"{self.name}:event:{event_id}"):
            log.info("slack.duplicate_event", event_id=event_id)
            return None

        chat_type = chat_type_of(event, channel_id)
        raw_text = str(event.get("text") or "")
        thread_ts = str(event.get("thread_ts") or "") or None
        in_thread = thread_ts is not None and thread_ts != ts
        parent_text: str | None = None
        bot_in_thread = False
        if in_thread and thread_ts is not None:
            parent_text, bot_in_thread = await self._thread_context(channel_id, thread_ts)
        text = message_text(event, self.bot_user_id)
        if parent_text and not bot_in_thread and not self._is_command(text):
            # The bot is joining this thread: the session has no history of it yet, so the
            # model needs the message that started it (later turns are in the history).
            quoted = " ".join(parent_text.split())[:THREAD_CONTEXT_CHARS]
            text = f'[In a thread that starts with: "{quoted}"]\n{text}'

        if chat_type is ChatType.DIRECT:
            addressed = True
            thread_id = thread_ts if in_thread else None
        else:
            addressed = mention or mentions(raw_text, self.bot_user_id) or bot_in_thread
            if in_thread:
                thread_id = thread_ts
            elif self._is_command(text):
                # A top-level /stop means the run in the sender's latest thread here.
                thread_id = self._latest_thread.get((channel_id, user))
            else:
                thread_id = ts if self.settings.reply_in_thread else None
            if addressed and thread_id is not None:
                self._threads[(channel_id, thread_id)] = True
                self._latest_thread[(channel_id, user)] = thread_id

        return InboundMessage(
            chat=ChatRef(self.name, channel_id, chat_type, thread_id),
            message_id=ts,
            sender=Sender(id=user, name=self._display_name(event, user)),
            text=text,
            addressed=addressed,
            reply_to_text=parent_text,
            metadata={
                "event_id": event_id,
                "ts": ts,
                "thread_ts": thread_ts or "",
                "channel_type": str(event.get("channel_type") or ""),
                "team": str(body.get("team_id") or event.get("team") or ""),
            },
        )

    @staticmethod
    def _is_command(text: str) -> bool:
        return text.strip().lower() in COMMANDS

    @staticmethod
    def _display_name(event: dict[str, Any], user: str) -> str:
        profile = event.get("user_profile")
        if isinstance(profile, dict):
            return str(profile.get("display_name") or profile.get("real_name") or user)
        return user

    async def _thread_context(self, channel_id: str, thread_ts: str) -> tuple[str | None, bool]:
        """The thread parent's text, and whether the bot takes part in the thread."""
        known = (channel_id, thread_ts) in self._threads
        try:
            with translate_slack_errors("conversations.replies"):
                replies = await self.client.conversations_replies(
                    channel=channel_id, ts=thread_ts, limit=THREAD_FETCH_LIMIT
                )
        except ChannelError as exc:
            log.info("slack.thread_fetch_failed", channel=channel_id, error=str(exc))
            return None, known
        messages = [m for m in replies.get("messages") or [] if isinstance(m, dict)]
        parent = next((m for m in messages if m.get("ts") == thread_ts), None)
        parent_text = str(parent.get("text") or "") if parent else None
        ours = any(
            m.get("user") == self.bot_user_id or (self.bot_id and m.get("bot_id") == self.bot_id)
            for m in messages
        )
        mentioned = parent_text is not None and mentions(parent_text, self.bot_user_id)
        if ours or mentioned:
            self._threads[(channel_id, thread_ts)] = True
        return parent_text, known or ours or mentioned

    async def _process_command(self, command: dict[str, Any]) -> None:
        """The ``/stop`` and ``/stopall`` slash commands, fed in as plain messages."""
        channel_id = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        name = str(command.get("command") or "")
        if not channel_id or not user or name not in COMMANDS or self._handler is None:
            return
        chat_type = ChatType.DIRECT if channel_id.startswith("D") else ChatType.GROUP
        thread_id = (
            self._latest_thread.get((channel_id, user)) if chat_type is ChatType.GROUP else None
        )
        trigger = str(command.get("trigger_id") or f"{time.time():.6f}")
        msg = InboundMessage(
            chat=ChatRef(self.name, channel_id, chat_type, thread_id),
            message_id=f"command:{trigger}",
            sender=Sender(id=user, name=str(command.get("user_name") or user)),
            text=name,
            metadata={"slash_command": name},
        )
        try:
            await self._handler(msg)
        except Exception:
            log.exception("slack.command_failed", command=name)

    # -- outbound ----------------------------------------------------------------------------

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        thread_ts = chat.thread_id
        if thread_ts is None and reply_to and chat.chat_type is ChatType.GROUP:
            thread_ts = reply_to if self.settings.reply_in_thread else None
        if self.pacer is not None:
            waited = await self.pacer.acquire(chat.chat_id)
            if waited:
                log.info("slack.post_paced", channel=chat.chat_id, waited=round(waited, 3))
        kwargs: dict[str, Any] = {"channel": chat.chat_id, "text": text, "mrkdwn": True}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        response = await self.poster.post(**kwargs)
        if thread_ts:
            self._threads[(chat.chat_id, thread_ts)] = True
            # Slack clears the assistant status itself when the app replies in the thread.
            self._forget_status((chat.chat_id, thread_ts))
        return MessageRef(chat=chat, message_id=str(response.get("ts") or ""))

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        key = _thread_key(message.chat)
        if key is not None:
            if emoji in TERMINAL_EMOJI:
                self._spawn(self._clear_status(key), name="slack:status-clear")
            else:
                self._cancel_pending_clear(key)
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
        key = _thread_key(message.chat)
        if key is not None and key in self._statuses:
            # The end of a run clears its reaction; a progress change adds the next one at once.
            self._schedule_clear(key, STATUS_GRACE)
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
        key = _thread_key(chat)
        if key is None or self._status_disabled or key in self._status_off:
            return
        status = self._statuses.get(key)
        text = status.text if status is not None else self.settings.thinking_status
        if not await self._set_status(key, text):
            return
        status = self._statuses.setdefault(key, _Status(text))
        if status.expiry is not None:
            status.expiry.cancel()
        status.expiry = self._spawn(
            self._expire_status(key, self.settings.status_ttl), name="slack:status-ttl"
        )

    def show_progress(self, message: MessageRef, tool: str | None) -> None:
        """ "is thinking…" / "is using read_file…" in an assistant thread that shows a status."""
        key = _thread_key(message.chat)
        if key is None or key not in self._statuses:
            return
        if tool is None:
            text = self.settings.thinking_status
        else:
            text = self.settings.tool_status.replace("{tool}", tool or "a tool")
        self._spawn(self._update_status_text(message.chat, text), name="slack:status-text")

    async def _set_status(self, key: tuple[str, str], text: str) -> bool:
        channel_id, thread_ts = key
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=channel_id, thread_ts=thread_ts, status=text
            )
        except SlackApiError as exc:
            code = slack_error_code(exc)
            if code in ("missing_scope", "not_allowed_token_type", "unknown_method"):
                self._status_disabled = True  # not for this app at all
            else:
                self._status_off[key] = True  # not an assistant thread, say
            log.info("slack.status_unavailable", error=code, channel=channel_id)
            return False
        except Exception as exc:
            log.info("slack.status_failed", error=str(exc), channel=channel_id)
            return False
        return True

    async def _update_status_text(self, chat: ChatRef, text: str) -> None:
        key = _thread_key(chat)
        status = self._statuses.get(key) if key is not None else None
        if key is None or status is None or status.text == text:
            return
        status.text = text
        await self._set_status(key, text)

    def _schedule_clear(self, key: tuple[str, str], delay: float) -> None:
        status = self._statuses.get(key)
        if status is None:
            return
        self._cancel_pending_clear(key)
        status.pending_clear = self._spawn(
            self._expire_status(key, delay), name="slack:status-clear"
        )

    def _cancel_pending_clear(self, key: tuple[str, str]) -> None:
        status = self._statuses.get(key)
        if status is not None and status.pending_clear is not None:
            status.pending_clear.cancel()
            status.pending_clear = None

    async def _expire_status(self, key: tuple[str, str], delay: float) -> None:
        await asyncio.sleep(delay)
        await self._clear_status(key)

    async def _clear_status(self, key: tuple[str, str]) -> None:
        if self._forget_status(key) is not None:
            await self._set_status(key, "")

    def _forget_status(self, key: tuple[str, str]) -> _Status | None:
        status = self._statuses.pop(key, None)
        if status is None:
            return None
        current = asyncio.current_task()
        for task in (status.expiry, status.pending_clear):
            if task is not None and task is not current:
                task.cancel()
        return status
