"""Typed views of the Zalo Bot API's JSON, parsed tolerantly.

Unknown fields are ignored and missing optional ones default, so a new field or event from the
platform never crashes the adapter. Ids are strings on the wire; numbers are accepted too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ZaloEvent(enum.StrEnum):
    TEXT = "message.text.received"
    IMAGE = "message.image.received"
    STICKER = "message.sticker.received"
    VOICE = "message.voice.received"
    # Sent instead of the content for protected senders (children, some accounts): legitimate.
    UNSUPPORTED = "message.unsupported.received"


@dataclass(frozen=True, slots=True)
class BotInfo:
    id: str
    account_name: str = ""
    display_name: str = ""
    can_join_groups: bool = False


@dataclass(frozen=True, slots=True)
class SentMessage:
    message_id: str
    date: int | None = None  # milliseconds since the epoch


@dataclass(frozen=True, slots=True)
class WebhookInfo:
    url: str
    updated_at: int | None = None


@dataclass(frozen=True, slots=True)
class ZaloUser:
    id: str
    display_name: str = ""
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class ZaloMessage:
    message_id: str
    chat_id: str
    chat_type: str  # "PRIVATE" or "GROUP" (groups are beta on the platform)
    sender: ZaloUser
    date: int | None = None  # milliseconds
    text: str | None = None
    photo: str | None = None
    caption: str | None = None
    sticker: str | None = None
    url: str | None = None
    voice_url: str | None = None
    reply_to_sender_id: str | None = None  # undocumented; read when present
    mention_ids: tuple[str, ...] = ()  # undocumented; read when present


@dataclass(frozen=True, slots=True)
class ZaloUpdate:
    event_name: str
    message: ZaloMessage | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def _str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(int(value)) if float(value).is_integer() else str(value)
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def parse_bot_info(result: Any) -> BotInfo:
    data = result if isinstance(result, dict) else {}
    return BotInfo(
        id=_str(data.get("id")) or "",
        account_name=_str(data.get("account_name")) or "",
        display_name=_str(data.get("display_name")) or _str(data.get("name")) or "",
        can_join_groups=bool(data.get("can_join_groups")),
    )


def parse_sent_message(result: Any) -> SentMessage:
    data = result if isinstance(result, dict) else {}
    return SentMessage(message_id=_str(data.get("message_id")) or "", date=_int(data.get("date")))


def parse_webhook_info(result: Any) -> WebhookInfo:
    data = result if isinstance(result, dict) else {}
    return WebhookInfo(url=_str(data.get("url")) or "", updated_at=_int(data.get("updated_at")))


def parse_message(data: Any) -> ZaloMessage | None:
    if not isinstance(data, dict):
        return None
    sender = _dict(data.get("from"))
    chat = _dict(data.get("chat"))
    chat_id = _str(chat.get("id"))
    sender_id = _str(sender.get("id"))
    if not chat_id or not sender_id:
        return None
    reply = _dict(data.get("reply_to_message") or data.get("quote"))
    reply_from = _dict(reply.get("from"))
    raw_mentions = data.get("mentions")
    mentions: list[Any] = raw_mentions if isinstance(raw_mentions, list) else []
    mention_ids = tuple(
        i
        for i in (_str(m.get("id") or m.get("user_id")) for m in mentions if isinstance(m, dict))
        if i
    )
    return ZaloMessage(
        message_id=_str(data.get("message_id")) or "",
        chat_id=chat_id,
        chat_type=str(chat.get("chat_type") or "PRIVATE").upper(),
        sender=ZaloUser(
            id=sender_id,
            display_name=_str(sender.get("display_name")) or _str(sender.get("name")) or "",
            is_bot=bool(sender.get("is_bot")),
        ),
        date=_int(data.get("date")),
        text=_str(data.get("text")),
        photo=_str(data.get("photo")) or _str(data.get("photo_url")),
        caption=_str(data.get("caption")),
        sticker=_str(data.get("sticker")),
        url=_str(data.get("url")),
        voice_url=_str(data.get("voice_url")),
        reply_to_sender_id=_str(reply_from.get("id")),
        mention_ids=mention_ids,
    )


def parse_update(data: Any) -> ZaloUpdate | None:
    """One event, bare (``{event_name, message}``) or wrapped (``{ok, result: {...}}``)."""
    if not isinstance(data, dict):
        return None
    if "event_name" not in data and isinstance(data.get("result"), dict):
        data = data["result"]
    name = data.get("event_name")
    if not isinstance(name, str):
        return None
    return ZaloUpdate(event_name=name, message=parse_message(data.get("message")), raw=data)


def parse_updates(result: Any) -> list[ZaloUpdate]:
    """``getUpdates``'s result: one event object, a list of them, or nothing."""
    items = result if isinstance(result, list) else [result] if result else []
    return [u for u in (parse_update(item) for item in items) if u is not None]
