"""A file from the agent's workspace into a Telegram chat: ``sendPhoto`` for a picture Telegram
can show, ``sendDocument`` for anything else (the ``send_file`` tool, issue 29).

Telegram's limits for bots (cloud Bot API): a photo at most 10 MB, with width + height at most
10,000 and a side ratio of at most 20; any file at most 50 MB; a caption at most 1,024
characters (UTF-16 units, as for text). A file over 50 MB is refused before anything is
uploaded; a picture over 10 MB, or one Telegram won't take as a photo (its dimensions), goes
as a document instead, so the user still gets it. A caption too long for one file is cut on a
line or word boundary and the rest follows as a plain message. Captions are plain text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

import structlog
from telegram import InputFile, Message, ReplyParameters

from channels.errors import BadRequest
from channels.files import upload_size
from channels.protocol import SentFile
from channels.telegram._sending import TelegramSender
from channels.telegram._text import split_units
from channels.types import ChatRef, MessageRef

log = structlog.get_logger(__name__)

MAX_FILE_BYTES = 50_000_000
MAX_PHOTO_BYTES = 10_000_000
MAX_CAPTION_UNITS = 1024
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
# Bad Request descriptions that mean "not as a photo", where the same bytes go as a document.
_NOT_A_PHOTO = ("PHOTO_INVALID_DIMENSIONS", "PHOTO_EXT_INVALID", "IMAGE_PROCESS_FAILED")


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def split_caption(caption: str) -> tuple[str, str]:
    """``(what fits under the file, the rest)``, cut where a reader expects a break."""
    caption = caption.strip()
    if not caption:
        return "", ""
    head = split_units(caption, MAX_CAPTION_UNITS)[0]
    return head, caption[len(head) :].strip()


class TelegramFiles:
    """``sendPhoto`` / ``sendDocument`` with the send rules of :class:`TelegramSender`."""

    def __init__(self, sender: TelegramSender) -> None:
        self.sender = sender

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
        size = await upload_size(
            path,
            name,
            platform="Telegram",
            limit=MAX_FILE_BYTES,
            size_text=megabytes,
            limit_of=" for a file sent by a bot",
        )
        data = await asyncio.to_thread(path.read_bytes)
        head, rest = split_caption(caption)
        how: Literal["photo", "document"] = "document"
        message: Message | None = None
        if mime in PHOTO_TYPES and size <= MAX_PHOTO_BYTES:
            try:
                message = await self._upload(chat, "photo", data, name, mime, head, reply_to)
                how = "photo"
            except BadRequest as exc:
                if not any(code in str(exc).upper() for code in _NOT_A_PHOTO):
                    raise
                log.info("telegram.photo_as_document", chat=chat.chat_id, error=str(exc))
        if message is None:
            message = await self._upload(chat, "document", data, name, mime, head, reply_to)
        ref = MessageRef(chat, str(message.message_id))
        if rest:
            await self.sender.send(chat, rest, None, None)
        return SentFile(ref, how)

    async def _upload(
        self,
        chat: ChatRef,
        kind: str,
        data: bytes,
        name: str,
        mime: str,
        caption: str,
        reply_to: str | None,
    ) -> Message:
        bot = self.sender.bot
        reply = (
            ReplyParameters(int(reply_to), allow_sending_without_reply=True)
            if reply_to and reply_to.isdigit()
            else None
        )
        thread = int(chat.thread_id) if chat.thread_id else None

        async def upload(chat_id: str) -> Message:
            # A new InputFile per attempt: a retried upload sends the same bytes again.
            file = InputFile(data, filename=name)
            file.mimetype = mime
            if kind == "photo":
                return await bot.send_photo(
                    chat_id,
                    file,
                    caption=caption or None,
                    message_thread_id=thread,
                    reply_parameters=reply,
                )
            return await bot.send_document(
                chat_id,
                file,
                caption=caption or None,
                message_thread_id=thread,
                reply_parameters=reply,
            )

        return await self.sender.send_upload(chat, upload)
