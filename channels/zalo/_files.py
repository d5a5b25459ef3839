"""Files from the agent's workspace into a Zalo chat (the ``send_file`` tool, issue 29).

The Zalo Bot API sends no documents at all, and its ``sendPhoto`` takes ``photo`` as a URL that
Zalo's servers download themselves: there is no upload. So:

- a JPEG or PNG picture goes with ``sendPhoto`` when Loopgate's server is public, i.e. in
  webhook mode: Zalo fetches it from a short-lived signed link (:mod:`channels.zalo._photo_links`);
- anything else, any picture in polling mode (no public URL), one over
  :data:`MAX_PHOTO_BYTES`, or one Zalo refuses (it could not fetch it) becomes an honest note in
  the chat naming the file, and the tool tells the agent the file itself was not delivered.

A caption over one message (2,000 characters) goes in full as the messages that follow.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
from pathlib import Path
from typing import Literal

import structlog
from starlette.requests import Request
from starlette.responses import Response

from channels.errors import BadRequest
from channels.protocol import SentFile
from channels.types import ChatRef, MessageRef
from channels.zalo._client import MAX_TEXT_CHARS, ZaloBotClient
from channels.zalo._photo_links import FILES_PATH, PhotoLinks

log = structlog.get_logger(__name__)

PHOTO_TYPES = frozenset({"image/jpeg", "image/png"})
MAX_PHOTO_BYTES = 10_000_000
"""Zalo documents no size limit for ``sendPhoto``; past this, a picture gets the note."""

Why = Literal["no_file_sending", "no_public_link", "too_large", "refused"]
_WHY = {
    "no_file_sending": "Zalo bots can't send files",
    "no_public_link": "a Zalo bot can send a picture only from a public link",
    "too_large": "too large for a Zalo photo",
    "refused": "Zalo could not fetch it",
}


def size_text(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1_000_000:.1f} MB"


def split_text(text: str, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at a space where there is one."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = rest.rfind(" ", limit // 2, limit + 1)
        cut = cut if cut > 0 else limit
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [*pieces, rest] if rest else pieces


def read_picture(path: Path) -> bytes:
    """The bytes of a linked picture; never through a symbolic link, never past the limit."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_PHOTO_BYTES + 1)
    if len(data) > MAX_PHOTO_BYTES:
        raise OSError(f"{path.name} grew past {MAX_PHOTO_BYTES} bytes")
    return data


def file_note(name: str, size: int, why: Why, caption: str) -> str:
    """The note sent in the file's place, at most one Zalo message long."""
    note = f"[file: {name}, {size_text(size)} — not sent: {_WHY[why]}]"
    caption = caption.strip()
    if caption:
        note = f"{caption}\n{note}"
        if len(note) > MAX_TEXT_CHARS:
            room = MAX_TEXT_CHARS - (len(note) - len(caption)) - 1
            note = f"{caption[:room]}…\n{note[len(caption) + 1 :]}"
    return note


class ZaloFiles:
    """``send_file`` for one bot, and the signed links its pictures are fetched from (with
    ``links``: webhook mode; None: every file becomes a note)."""

    def __init__(self, client: ZaloBotClient, links: PhotoLinks | None) -> None:
        self.client = client
        self.links = links
        self.path = FILES_PATH if links is not None else ""
        """Where :meth:`serve_file` answers (:class:`~channels.protocol.FileHost`); "": nowhere."""

    async def send_file(
        self, chat: ChatRef, path: Path, *, name: str, mime: str, caption: str
    ) -> SentFile:
        client, links = self.client, self.links
        size = (await asyncio.to_thread(path.stat)).st_size
        why: Why = "no_file_sending"
        if mime in PHOTO_TYPES:
            why = "no_public_link" if links is None else "too_large"
            if links is not None and size <= MAX_PHOTO_BYTES:
                pieces = split_text(caption)
                head = pieces[0] if len(pieces) == 1 else None
                try:
                    sent = await client.send_photo(chat.chat_id, links.link(path, name), head)
                except BadRequest as exc:
                    log.warning("zalo.photo_refused", chat=chat.chat_id, error=str(exc))
                    why = "refused"
                else:
                    for piece in pieces if head is None else ():
                        await client.send_message(chat.chat_id, piece)
                    return SentFile(MessageRef(chat, sent.message_id), "photo")
        sent = await client.send_message(chat.chat_id, file_note(name, size, why, caption))
        return SentFile(MessageRef(chat, sent.message_id), "note")

    async def serve_file(self, request: Request) -> Response:
        """``GET /zalo/files/{token}/{name}``, the picture a signed link names (Zalo fetching a
        ``sendPhoto``); 404 for a forged or expired link or a file gone since."""
        token = request.url.path.removeprefix(FILES_PATH).split("/", 1)[0]
        path = self.links.resolve(token) if self.links is not None else None
        if path is None:
            return Response(status_code=404)
        mime = mimetypes.guess_type(path.name)[0] or ""
        if mime not in PHOTO_TYPES:
            return Response(status_code=404)
        try:
            data = await asyncio.to_thread(read_picture, path)
        except OSError:  # gone, or a link swapped in since it was signed
            return Response(status_code=404)
        log.info("zalo.photo_fetched", bytes=len(data))
        return Response(data, media_type=mime)
