"""The Telegram adapter: long polling or webhook in, Bot API calls out (python-telegram-bot).

Every request goes to ``{api_base_url}/bot{token}/{method}``, so a self-hosted Bot API server or
a test fake works the same as api.telegram.org.

Sending, editing and deleting (:mod:`channels.telegram._sending`) follow Telegram's rules:
pacing, holding a chat on a 429, retrying 5xx, plain text when the HTML is refused, re-splitting
what is too long, following a group that became a supergroup.

Streaming (``bot/pipeline/streaming/``) uses the same rules: ``edit_text`` is paced like a send,
falls back to plain text the same way and treats "message is not modified" as done;
``delete_message`` says False when Telegram refuses. In private chats ``open_stream`` gives a
draft preview (:mod:`channels.telegram._drafts`) unless ``TelegramOptions.drafts`` is off or
Telegram refused drafts once (an older Bot API server, a bot not allowed to use them).

Receiving acknowledges Telegram only once the bot's handler has stored the message: the poller
(:mod:`channels.telegram._polling`) confirms an offset only past updates handed over, the webhook
answers after the handler returned. An update the bot did not take
(:class:`~channels.errors.NotAccepted`) stays unconfirmed (poller) or gets a 503 (webhook), so
Telegram delivers it again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections import OrderedDict
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from telegram import Bot, BotCommand, ReactionTypeEmoji, Update
from telegram.constants import ParseMode

from channels.errors import BadRequest, ChannelError, FileTooLarge, Forbidden, NotAccepted
from channels.intake import Intake, already_seen, remember_seen
from channels.protocol import (
    InboundHandler,
    PaceStore,
    PlatformStream,
    PollGate,
    SeenStore,
    SentFile,
    StateStore,
)
from channels.telegram._aiohttp_request import AiohttpRequest
from channels.telegram._drafts import DraftStream
from channels.telegram._errors import (
    UnknownTokenOrMethod,
    translate_telegram_errors,
)
from channels.telegram._files import TelegramFiles
from channels.telegram._migrations import ChatMigrations
from channels.telegram._normalize import BotIdentity, Skipped, normalize_update
from channels.telegram._options import TelegramOptions
from channels.telegram._polling import Poller
from channels.telegram._ratelimit import SendPacer
from channels.telegram._sending import TelegramSender
from channels.types import (
    MEDIA_GROUP,
    Attachment,
    Capabilities,
    ChatRef,
    ChatType,
    InboundMessage,
    MessageRef,
)

log = structlog.get_logger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
ADMIN_CACHE_SECONDS = 60.0
_ALBUMS_REMEMBERED = 256
COMMANDS = (
    ("stop", "Stop the answer in progress"),
    ("stopall", "Stop everything in this chat and drop queued messages"),
    ("reset", "Start a new conversation"),
    ("help", "What I can do"),
)


class TelegramChannel:
    webhook_path = WEBHOOK_PATH

    def __init__(
        self,
        options: TelegramOptions,
        *,
        state: StateStore,
        seen: SeenStore,
        bot: Bot | None = None,
        poll_gate: PollGate | None = None,
        pace_store: PaceStore | None = None,
    ) -> None:
        """``pace_store``: the send budgets shared with the bot's other processes."""
        self.options = options
        self.poll_gate = poll_gate
        """With several processes: polls only while this one is the bot's elected poller."""
        self.name = options.name
        self.capabilities = Capabilities(
            max_chars=4000,  # Telegram allows 4096; the margin absorbs counting differences
            formatting="html",
            typing=True,
            reactions=options.reactions,
            threads=True,
            edits=True,
        )
        self._state = state
        self._seen = seen
        base = options.api_base_url.rstrip("/")
        self.bot = bot or Bot(
            options.token,
            base_url=f"{base}/bot",
            base_file_url=f"{base}/file/bot",
            # aiohttp, not httpx: less than half the CPU per Bot API call (issue 16)
            request=AiohttpRequest(connection_pool_size=64, read_timeout=15.0),
            get_updates_request=AiohttpRequest(connection_pool_size=2, read_timeout=10.0),
        )
        self.pacer = SendPacer(options.rate_limits, shared=pace_store, channel=options.name)
        self.me: BotIdentity | None = None
        self._handler: InboundHandler | None = None
        self._poller: Poller | None = None
        self._intake = Intake()
        self.migrations = ChatMigrations(state, options.name)
        self.sender = TelegramSender(
            self.bot, self.pacer, self.migrations, retry_backoff=options.retry_backoff
        )
        self.files = TelegramFiles(self.sender)
        self._admins: dict[str, tuple[float, frozenset[str]]] = {}
        self._addressed_albums: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Recent (chat, media_group_id) whose caption addressed the bot in a group."""
        self._initialized = False
        self.drafts = options.drafts
        """Whether private chats stream as drafts; turned off when Telegram refuses them."""
        self._draft_ids = itertools.count(secrets.randbelow(2**30) + 1)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        try:
            with translate_telegram_errors():
                await self.bot.initialize()  # getMe
        except Forbidden:
            await self._close_http()
            # PTB's message quotes the token: never let it reach a log or the console.
            raise Forbidden(
                "telegram rejected the bot token (check channels.telegram.token)"
            ) from None
        except BaseException:
            await self._close_http()  # PTB opened its HTTP clients before getMe failed
            raise
        self._initialized = True
        self.me = BotIdentity(self.bot.id, self.bot.username)
        self._handler = on_message
        await self._register_commands()
        allowed = list(self.options.allowed_updates)
        if self.options.mode == "webhook":
            with translate_telegram_errors():
                await self.bot.set_webhook(
                    self.options.webhook_url,
                    secret_token=self.options.webhook_secret,
                    allowed_updates=allowed,
                )
        if self.options.mode == "polling":
            await self._leave_webhook()
            self._poller = Poller(
                self.bot, self.options, self._state, self._process, gate=self.poll_gate
            )
            self._poller.start()
        log.info("telegram.started", mode=self.options.mode, bot=self.me.username)

    async def _leave_webhook(self) -> None:
        # getUpdates is refused while a webhook is set.
        try:
            with translate_telegram_errors():
                await self.bot.delete_webhook(drop_pending_updates=False)
        except BadRequest as exc:
            # An odd refusal must not keep the channel from ever serving (retrying won't change
            # the answer). If a webhook really is still set, getUpdates says so (409 Conflict)
            # and the poller logs it on every attempt.
            log.warning("telegram.delete_webhook_failed", error=str(exc))

    async def stop_receiving(self) -> None:
        """Stop polling (or refuse webhooks with 503); sending keeps working."""
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.stop()
        busy = await self._intake.close()
        if busy:
            log.warning("telegram.webhooks_unfinished", count=busy)

    async def stop(self) -> None:
        await self.stop_receiving()
        self._handler = None
        if self._initialized:
            self._initialized = False
            with suppress(Exception):
                await self.bot.shutdown()

    async def _close_http(self) -> None:
        with suppress(Exception):
            await self.bot.shutdown()

    async def _register_commands(self) -> None:
        try:
            with translate_telegram_errors():
                await self.bot.set_my_commands([BotCommand(c, d) for c, d in COMMANDS])
        except ChannelError as exc:
            log.warning("telegram.set_commands_failed", error=str(exc))

    # -- receiving -------------------------------------------------------------------------

    async def handle_webhook(self, request: Request) -> Response:
        """Check the secret, hand the update over, then answer: 200 once the bot has it, 503
        when it did not take it (Telegram delivers it again later)."""
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self.options.webhook_secret.encode()):
            log.warning("telegram.webhook_rejected", reason="bad_secret")
            return JSONResponse({"ok": False, "error": "unauthorized"}, status_code=401)
        if self._handler is None or not self._intake.open:
            return JSONResponse({"ok": False, "error": "not receiving"}, status_code=503)
        body = await request.body()
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
                raise ValueError("no update_id")
        except ValueError:
            # Logged once, without the content: it may be anything, of any size.
            log.warning("telegram.webhook_malformed", size=len(body))
            return JSONResponse({"ok": False, "error": "not a Telegram update"}, status_code=400)
        with self._intake.handing_over():
            try:
                await self._process_raw(data)
            except NotAccepted as exc:
                log.info("telegram.not_accepted", update_id=data["update_id"], error=str(exc))
                return JSONResponse({"ok": False, "error": "not accepted"}, status_code=503)
        return JSONResponse({"ok": True})

    async def _process_raw(self, data: dict[str, object]) -> None:
        try:
            update = Update.de_json(data, self.bot)
        except Exception as exc:
            # Acknowledged all the same: the same bytes would fail again on every redelivery.
            log.warning("telegram.bad_update", error=str(exc))
            return
        await self._process(update)

    async def _process(self, update: Update) -> None:
        """Normalize and hand over one update.

        A message goes to the handler without an update-level record: the handler dedupes it
        on its own key (chat and message id, ``InboundMessage.dedupe_key``) in the transaction
        that stores it, so a redelivered update is still one message, and a peek and a record
        here would cost every message two more round trips (four with a cluster's Redis).
        Other updates (edits, service messages, migrations) have no such key: they are
        recorded under the update id.

        Raises only :class:`NotAccepted` (the bot did not take it: don't acknowledge); any other
        failure is logged and the update counts as handled, so one bad update can't be
        redelivered forever or stop intake.
        """
        handler, me = self._handler, self.me
        if handler is None or me is None:
            raise NotAccepted("telegram: not receiving")
        try:
            result = normalize_update(
                update,
                me,
                channel=self.name,
                reply_context_chars=self.options.reply_context_chars,
            )
        except Exception:
            log.exception("telegram.update_failed", update_id=update.update_id)
            return
        if isinstance(result, Skipped):
            await self._skip(update.update_id, result)
            return
        try:
            await handler(self._album_addressing(result))
        except (NotAccepted, asyncio.CancelledError):
            # The redelivery counts. Cancelled: whether the bot stored it is unknown; if it
            # did, the message's own dedupe key catches the redelivery.
            raise
        except Exception:
            log.exception("telegram.update_failed", update_id=update.update_id)

    async def _skip(self, update_id: int, skipped: Skipped) -> None:
        key = f"{self.name}:update:{update_id}"
        if await already_seen(self._seen, key, channel=self.name):
            log.info("inbound.skipped", channel=self.name, reason="duplicate_update")
            return
        try:
            if skipped.migrate_to_chat_id is not None:
                await self.migrations.remember(skipped.chat_id, str(skipped.migrate_to_chat_id))
            log.info(
                "inbound.skipped", channel=self.name, reason=skipped.reason, chat=skipped.chat_id
            )
        except (NotAccepted, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("telegram.update_failed", update_id=update_id)
        # Recorded only now that it is handled: a kill before this line leaves the update
        # unrecorded, and its redelivery is taken.
        await remember_seen(self._seen, key, channel=self.name)

    # -- sending, editing and streaming (bot/pipeline/streaming/): channels.telegram._sending ---

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        refs = await self.sender.send(chat, text, reply_to, ParseMode.HTML)
        return refs[0]

    async def send_plain(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> list[MessageRef]:
        """Send ``text`` as it is (no markup), split when Telegram finds it too long."""
        return await self.sender.send(chat, text, reply_to, None)

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
        """:class:`~channels.protocol.FileSending`: ``sendPhoto`` or ``sendDocument``
        (:mod:`channels.telegram._files`, which holds Telegram's limits)."""
        return await self.files.send_file(
            chat, path, name=name, mime=mime, caption=caption, reply_to=reply_to
        )

    async def edit_text(self, message: MessageRef, text: str) -> None:
        """Replace a sent message's text by ``text`` (Telegram HTML, like :meth:`send_text`).

        Paced like a send; HTML Telegram can't parse is sent again as plain text; an edit that
        changes nothing is fine. A 429 holds the chat and raises
        :class:`~channels.errors.RetryAfter`; a text too long for one message raises
        :class:`~channels.errors.BadRequest` (an edit can't become two messages).
        """
        await self.sender.edit_text(message, text)

    async def delete_message(self, message: MessageRef) -> bool:
        """Delete a message; False when Telegram refuses (not found, too old, no rights).

        A 429 holds the chat and raises :class:`~channels.errors.RetryAfter`; 5xx and network
        failures are retried, then raised.
        """
        return await self.sender.delete_message(message)

    def open_stream(self, chat: ChatRef, *, reply_to: str | None = None) -> PlatformStream | None:
        """A draft preview (:class:`~channels.telegram._drafts.DraftStream`) in a private chat;
        None in groups, with drafts off, or once Telegram refused them (send + edit then)."""
        if not self.drafts or chat.chat_type is not ChatType.DIRECT:
            return None
        if not chat.chat_id.isdigit() or int(chat.chat_id) <= 0:  # private chats only
            return None
        return DraftStream(self, chat, next(self._draft_ids), reply_to)

    async def send_draft(self, chat: ChatRef, draft_id: int, text: str) -> None:
        """One ``sendMessageDraft`` (plain text), retried on 5xx; a 429 holds the chat and
        raises :class:`~channels.errors.RetryAfter`. Not paced: the bot throttles previews."""
        await self.sender.send_draft(chat, draft_id, text)

    def drafts_refused(self, chat: ChatRef, exc: ChannelError) -> None:
        """Telegram refused a stream's first draft: unless that refusal is about this chat only
        (403: the user blocked the bot), stop offering drafts."""
        if isinstance(exc, Forbidden) and not isinstance(exc, UnknownTokenOrMethod):
            log.info("telegram.draft_forbidden", chat=chat.chat_id, error=str(exc))
            return
        self.drafts = False
        log.warning("telegram.drafts_unsupported", error=str(exc))

    # -- chat actions ------------------------------------------------------------------------

    async def set_typing(self, chat: ChatRef) -> None:
        chat_id = await self.migrations.resolve(chat.chat_id)
        with translate_telegram_errors():
            await self.bot.send_chat_action(
                chat_id,
                "typing",
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
            )

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        # setMessageReaction replaces the bot's reaction: one status emoji at a time.
        chat_id = await self.migrations.resolve(message.chat.chat_id)
        with translate_telegram_errors():
            await self.bot.set_message_reaction(
                chat_id, int(message.message_id), [ReactionTypeEmoji(emoji)]
            )

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None:
        chat_id = await self.migrations.resolve(message.chat.chat_id)
        with translate_telegram_errors():
            await self.bot.set_message_reaction(chat_id, int(message.message_id), [])

    def _album_addressing(self, msg: InboundMessage) -> InboundMessage:
        """In a group only the part of an album that carries the caption can mention the bot:
        the album's other parts (Telegram sends the captioned one first) are addressed with it,
        so the album reaches the agent whole."""
        group = msg.metadata.get(MEDIA_GROUP)
        if group is None or msg.chat.chat_type is ChatType.DIRECT:
            return msg
        key = (msg.chat.chat_id, group)
        if msg.addressed:
            self._addressed_albums[key] = None
            while len(self._addressed_albums) > _ALBUMS_REMEMBERED:
                self._addressed_albums.popitem(last=False)
            return msg
        return replace(msg, addressed=True) if key in self._addressed_albums else msg

    async def fetch_file(self, attachment: Attachment, *, max_bytes: int | None = None) -> bytes:
        # getFile, then GET {api_base_url}/file/bot{token}/{file_path}; a file id stays valid
        # for the bot, so a replayed message is fetched again the same way.
        with translate_telegram_errors():
            file = await self.bot.get_file(attachment.file_id)
        if max_bytes is not None and (file.file_size or 0) > max_bytes:
            raise FileTooLarge(file.file_size or 0, max_bytes)
        with translate_telegram_errors():
            data = bytes(await file.download_as_bytearray())
        if max_bytes is not None and len(data) > max_bytes:
            raise FileTooLarge(len(data), max_bytes)
        return data

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        if chat.chat_type is ChatType.DIRECT:
            return True
        chat_id = await self.migrations.resolve(chat.chat_id)
        cached = self._admins.get(chat_id)
        now = time.monotonic()
        if cached is None or now - cached[0] > ADMIN_CACHE_SECONDS:
            with translate_telegram_errors():
                members = await self.bot.get_chat_administrators(chat_id)
            cached = (now, frozenset(str(m.user.id) for m in members))
            self._admins[chat_id] = cached
        return user_id in cached[1]
