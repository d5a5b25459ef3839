"""What a Zalo message becomes for the model: its text (non-text content as a clear note) and
its photo, and a stable id for an event that has none."""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import urlsplit

from channels.types import Attachment
from channels.zalo._types import ZaloEvent, ZaloMessage, ZaloUpdate


def content_text(event_name: str, msg: ZaloMessage) -> str:
    """The message as text for the model; non-text content becomes a clear note."""
    if event_name == ZaloEvent.TEXT:
        return msg.text or ""
    if event_name == ZaloEvent.IMAGE:
        caption = msg.caption or msg.text  # some clients put the caption in ``text``
        if msg.photo:  # the photo itself is an attachment (photo_attachments)
            return caption or ""
        note = "[The user sent an image. You can't see images here.]"
        return f"{note}\n{caption}" if caption else note
    if event_name == ZaloEvent.STICKER:
        where = f" ({msg.url})" if msg.url else ""
        return f"[The user sent a sticker{where}.]"
    if event_name == ZaloEvent.VOICE:
        return "[The user sent a voice message. You can't listen to audio here.]"
    if event_name == ZaloEvent.UNSUPPORTED:
        return (
            "[The user sent a message whose content Zalo does not share with bots. "
            "If you need it, ask them to write it as text.]"
        )
    kind = event_name.removeprefix("message.").removesuffix(".received") or event_name
    return f"[The user sent a kind of message this bot can't read ({kind}).]"


def photo_attachments(event_name: str, msg: ZaloMessage, message_id: str) -> tuple[Attachment, ...]:
    """The photo of an image message, fetched from the URL Zalo gives (``photo`` or
    ``photo_url``); Zalo states no size, so the download itself is cut off at the limit."""
    if event_name != ZaloEvent.IMAGE or not msg.photo:
        return ()
    if urlsplit(msg.photo).scheme not in ("http", "https"):
        return ()
    name = f"photo_{re.sub(r'[^A-Za-z0-9_-]', '_', message_id)[:40]}.jpg"
    return (Attachment(kind="image", file_id=msg.photo, name=name, mime="image/jpeg"),)


def synthetic_id(update: ZaloUpdate) -> str:
    # No message_id: hash the event so a redelivery of the same event still dedupes.
    raw = json.dumps(update.raw, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256-" + hashlib.sha256(raw.encode()).hexdigest()[:32]
