"""Sending, editing and deleting Telegram messages, under Telegram's rules.

- pacing with token buckets (:mod:`channels.telegram._ratelimit`) before each message;
- 429: the chat is put on hold for ``retry_after`` and :class:`~channels.errors.RetryAfter` is
  raised, so the caller waits and resends (Telegram did not take the message: no duplicate);
- 5xx and connection failures: retried here with backoff, because Telegram did not take the
  message either; a timeout is *not* retried (the message may have arrived);
- "can't parse entities": resent once as plain text, so the message still arrives;
- "message is too long" (Telegram counts UTF-16 units, we count characters): re-split smaller;
- a group that became a supergroup: the new chat id is remembered and the send repeated there;
- 403 (blocked by the user, kicked): logged and raised, never retried.

Edits follow the same rules: paced like a send, plain text when the HTML is refused, "message is
not modified" counts as done. A delete says False when Telegram refuses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from telegram import Bot, Message, ReplyParameters
from telegram.constants import ParseMode

from channels.errors import BadRequest, Forbidden, RetryAfter
from channels.telegram._errors import (
    ChatMigrated,
    TelegramTimedOut,
    TelegramUnavailable,
    translate_telegram_errors,
)
from channels.telegram._migrations import ChatMigrations
from channels.telegram._ratelimit import SendPacer
from channels.telegram._text import html_to_plain, split_units
from channels.types import ChatRef, ChatType, MessageRef

log = structlog.get_logger(__name__)

T = TypeVar("T")

MAX_TEXT_UNITS = 4096  # Telegram's limit, in UTF-16 code units of the text after parsing
SEND_ATTEMPTS = 3


class TelegramSender:
    """The Bot API calls that send, edit or delete a message (and a draft preview's)."""

    def __init__(
        self,
        bot: Bot,
        pacer: SendPacer,
        migrations: ChatMigrations,
        *,
        retry_backoff: float,
    ) -> None:
        self.bot = bot
        self.pacer = pacer
        self.migrations = migrations
        self.retry_backoff = retry_backoff

    # -- sending ---------------------------------------------------------------------------

    async def send(
        self, chat: ChatRef, text: str, reply_to: str | None, parse_mode: str | None
    ) -> list[MessageRef]:
        return await self._plain_if_rejected(
            chat, text, parse_mode, lambda t, mode: self._send_as(chat, t, reply_to, mode)
        )

    async def _plain_if_rejected(
        self,
        chat: ChatRef,
        text: str,
        parse_mode: str | None,
        attempt: Callable[[str, str | None], Awaitable[T]],
    ) -> T:
        """``attempt(text, parse_mode)``, once more as plain text if Telegram can't parse the
        HTML, so the message still arrives (sends and edits alike)."""
        try:
            return await attempt(text, parse_mode)
        except BadRequest as exc:
            if parse_mode is None or "can't parse entities" not in str(exc).lower():
                raise
            log.warning("telegram.html_rejected", chat=chat.chat_id, error=str(exc))
        return await attempt(html_to_plain(text), None)

    async def _send_as(
        self, chat: ChatRef, text: str, reply_to: str | None, parse_mode: str | None
    ) -> list[MessageRef]:
        chat_id = await self.migrations.resolve(chat.chat_id)
        try:
            message = await self._send_once(chat, chat_id, text, reply_to, parse_mode)
        except ChatMigrated as exc:
            await self.migrations.remember(chat_id, str(exc.new_chat_id))
            message = await self._send_once(chat, str(exc.new_chat_id), text, reply_to, parse_mode)
        except BadRequest as exc:
            if "message is too long" in str(exc).lower():
                return await self._send_smaller(chat, text, reply_to, parse_mode)
            raise
        except Forbidden as exc:
            log.warning("telegram.forbidden", chat=chat_id, error=str(exc))
            raise
        return [MessageRef(chat, str(message.message_id))]

    async def _send_smaller(
        self, chat: ChatRef, text: str, reply_to: str | None, parse_mode: str | None
    ) -> list[MessageRef]:
        # Cutting HTML could split a tag: the pieces go out as plain text, split on lines.
        plain = html_to_plain(text) if parse_mode else text
        pieces = split_units(plain, MAX_TEXT_UNITS // 2) if len(plain) > 1 else [plain]
        log.warning("telegram.too_long_resplit", chat=chat.chat_id, pieces=len(pieces))
        refs: list[MessageRef] = []
        for index, piece in enumerate(pieces):
            refs += await self.send(chat, piece, reply_to if index == 0 else None, None)
        return refs

    async def _send_once(
        self,
        chat: ChatRef,
        chat_id: str,
        text: str,
        reply_to: str | None,
        parse_mode: str | None,
    ) -> Message:
        reply = (
            ReplyParameters(int(reply_to), allow_sending_without_reply=True)
            if reply_to and reply_to.isdigit()
            else None
        )

        async def call() -> Message:
            return await self.bot.send_message(
                chat_id,
                text,
                parse_mode=parse_mode,
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
                reply_parameters=reply,
            )

        return await self._paced(chat, chat_id, call, retry_timeouts=False)

    async def send_upload(
        self, chat: ChatRef, upload: Callable[[str], Awaitable[Message]]
    ) -> Message:
        """One file upload (``upload(chat_id)``: sendPhoto, sendDocument) under a send's rules:
        paced, a group that became a supergroup followed, a timeout not retried (the file may
        have arrived)."""
        chat_id = await self.migrations.resolve(chat.chat_id)
        try:
            return await self._paced(chat, chat_id, lambda: upload(chat_id), retry_timeouts=False)
        except ChatMigrated as exc:
            new_id = str(exc.new_chat_id)
            await self.migrations.remember(chat_id, new_id)
            return await self._paced(chat, new_id, lambda: upload(new_id), retry_timeouts=False)

    async def _paced(
        self,
        chat: ChatRef,
        chat_id: str,
        call: Callable[[], Awaitable[T]],
        *,
        retry_timeouts: bool,
    ) -> T:
        """A message send or edit: wait for the pacer, and hold the chat on a 429."""
        await self.pacer.acquire(chat_id, group=chat.chat_type is ChatType.GROUP)
        try:
            return await self._retrying(call, retry_timeouts=retry_timeouts)
        except RetryAfter as exc:
            self._rate_limited(chat_id, exc)
            raise

    def _rate_limited(self, chat_id: str, exc: RetryAfter) -> None:
        self.pacer.hold(chat_id, exc.retry_after)
        log.info("telegram.rate_limited", chat=chat_id, retry_after=exc.retry_after)

    async def _retrying(
        self, call: Callable[[], Awaitable[T]], *, retry_timeouts: bool = True
    ) -> T:
        """Retry 5xx/connection failures with exponential backoff (Telegram didn't act)."""
        delay = self.retry_backoff
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                with translate_telegram_errors():
                    return await call()
            except TelegramUnavailable as exc:
                if attempt == SEND_ATTEMPTS or (
                    isinstance(exc, TelegramTimedOut) and not retry_timeouts
                ):
                    raise
                log.info("telegram.retrying", error=str(exc), attempt=attempt, wait=delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    # -- editing, deleting, drafts ---------------------------------------------------------

    async def edit_text(self, message: MessageRef, text: str) -> None:
        """See :meth:`channels.telegram._channel.TelegramChannel.edit_text`."""
        await self._plain_if_rejected(
            message.chat, text, ParseMode.HTML, lambda t, mode: self._edit_as(message, t, mode)
        )

    async def _edit_as(self, message: MessageRef, text: str, parse_mode: str | None) -> None:
        chat_id = await self.migrations.resolve(message.chat.chat_id)

        async def call() -> Message | bool:
            return await self.bot.edit_message_text(
                text, chat_id, int(message.message_id), parse_mode=parse_mode
            )

        try:
            # A timed-out edit is safe to repeat: at worst the repeat changes nothing.
            await self._paced(message.chat, chat_id, call, retry_timeouts=True)
        except BadRequest as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    async def delete_message(self, message: MessageRef) -> bool:
        """See :meth:`channels.telegram._channel.TelegramChannel.delete_message`."""
        if not message.message_id.isdigit():
            return False
        chat_id = await self.migrations.resolve(message.chat.chat_id)

        async def call() -> bool:
            return await self.bot.delete_message(chat_id, int(message.message_id))

        try:
            return await self._retrying(call)
        except RetryAfter as exc:
            self._rate_limited(chat_id, exc)
            raise
        except (BadRequest, Forbidden) as exc:
            log.info("telegram.delete_refused", chat=chat_id, error=str(exc))
            return False

    async def send_draft(self, chat: ChatRef, draft_id: int, text: str) -> None:
        """See :meth:`channels.telegram._channel.TelegramChannel.send_draft`."""

        async def call() -> bool:
            return await self.bot.send_message_draft(
                int(chat.chat_id),
                draft_id,
                text,
                message_thread_id=int(chat.thread_id) if chat.thread_id else None,
            )

        try:
            await self._retrying(call)
        except RetryAfter as exc:
            self._rate_limited(chat.chat_id, exc)
            raise
