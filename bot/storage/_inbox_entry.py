"""What one inbox entry is: its states, its fields, and the stored form of its message."""

from __future__ import annotations

import enum
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from bot.errors import BotError
from bot.storage._sql import clean, clean_optional
from channels import Attachment, ChatRef, ChatType, InboundMessage, Sender


class InboxState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    ANSWERED = "answered"
    DROPPED = "dropped"
    FAILED = "failed"
    EXPIRED = "expired"


PENDING = (InboxState.QUEUED, InboxState.RUNNING)


class EntryTakenOver(BotError):
    """Another process holds this entry now (this one lost its lease): stop working on it."""


ENDED = (InboxState.ANSWERED, InboxState.DROPPED, InboxState.FAILED, InboxState.EXPIRED)


@dataclass(frozen=True, slots=True)
class InboxEntry:
    id: int
    session_key: str
    agent_id: str
    state: InboxState
    reason: str | None
    attempts: int
    message: InboundMessage
    answer: str | None
    parts: list[str]
    received_at: datetime
    updated_at: datetime
    owner: str | None
    previews: list[str] = field(default_factory=list)
    """Preview messages a streamed answer left on the platform (deleted by the replay)."""

    @property
    def channel(self) -> str:
        return self.message.chat.channel


def message_to_json(msg: InboundMessage) -> dict[str, Any]:
    return {
        "chat": {
            "channel": msg.chat.channel,
            "chat_id": msg.chat.chat_id,
            "chat_type": msg.chat.chat_type.value,
            "thread_id": msg.chat.thread_id,
        },
        "message_id": msg.message_id,
        "sender": {"id": msg.sender.id, "name": msg.sender.name, "is_bot": msg.sender.is_bot},
        "text": clean(msg.text),
        "addressed": msg.addressed,
        "sender_is_admin": msg.sender_is_admin,
        "reply_to_text": clean_optional(msg.reply_to_text),
        "received_at": msg.received_at.isoformat(),
        "metadata": dict(msg.metadata),
        # Only what fetches the file again (a replay downloads anew), never its bytes.
        "attachments": [attachment_to_json(a) for a in msg.attachments],
    }


def attachment_to_json(a: Attachment) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": a.kind,
        "file_id": a.file_id,
        "name": a.name,
        "mime": a.mime,
        "size": a.size,
    }
    if a.duration is not None:
        data["duration"] = a.duration
    if a.voice:
        data["voice"] = True
    return data


def attachment_from_json(a: dict[str, Any]) -> Attachment:
    return Attachment(
        kind=a["kind"],
        file_id=a["file_id"],
        name=a["name"],
        mime=a["mime"],
        size=a["size"],
        duration=a.get("duration"),
        voice=bool(a.get("voice", False)),
    )


def message_from_json(data: dict[str, Any]) -> InboundMessage:
    chat, sender = data["chat"], data["sender"]
    return InboundMessage(
        chat=ChatRef(
            channel=chat["channel"],
            chat_id=chat["chat_id"],
            chat_type=ChatType(chat["chat_type"]),
            thread_id=chat.get("thread_id"),
        ),
        message_id=data["message_id"],
        sender=Sender(
            id=sender["id"], name=sender.get("name", ""), is_bot=sender.get("is_bot", False)
        ),
        text=data["text"],
        addressed=data.get("addressed", True),
        sender_is_admin=data.get("sender_is_admin", False),
        reply_to_text=data.get("reply_to_text"),
        received_at=datetime.fromisoformat(data["received_at"]),
        metadata=dict(data.get("metadata") or {}),
        attachments=tuple(attachment_from_json(a) for a in data.get("attachments") or ()),
    )


def entry_of(row: Row[Any]) -> InboxEntry:
    """The entry an ``inbox`` row holds (any object with its columns as attributes)."""
    return InboxEntry(
        id=row.id,
        session_key=row.session_key,
        agent_id=row.agent_id,
        state=InboxState(row.state),
        reason=row.reason,
        attempts=row.attempts,
        message=message_from_json(row.message),
        answer=row.answer,
        parts=list(row.parts or []),
        received_at=row.received_at,
        updated_at=row.updated_at,
        owner=row.owner,
        previews=list(row.previews or []),
    )


def process_owner() -> str:
    """A name for this process that is unique across restarts and hosts."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
