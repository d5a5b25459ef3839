"""Platform-neutral message types shared by every channel adapter.

Adapters turn a platform update into an :class:`InboundMessage`; the bot turns the agent's answer
into calls on the :class:`~channels.protocol.Channel` protocol. Nothing here knows about LLMs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

Formatting = Literal["markdown", "html", "mrkdwn", "plain"]
"""How a channel renders rich text: raw markdown (web/CLI), Telegram HTML, Slack mrkdwn, plain."""


class ChatType(enum.StrEnum):
    DIRECT = "direct"  # one-to-one conversation with the bot
    GROUP = "group"  # any multi-user room: Telegram group/supergroup, Slack channel, Zalo group


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message lives: enough for an adapter to answer there."""

    channel: str
    chat_id: str
    chat_type: ChatType = ChatType.DIRECT
    thread_id: str | None = None  # Telegram forum topic, Slack thread_ts


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A message the platform knows, e.g. one we sent (used for reactions and replies)."""

    chat: ChatRef
    message_id: str


@dataclass(frozen=True, slots=True)
class Sender:
    id: str
    name: str = ""
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the platform can do; the delivery pipeline adapts to it instead of special-casing."""

    max_chars: int = 4096
    formatting: Formatting = "markdown"
    typing: bool = True
    reactions: bool = True
    threads: bool = False
    edits: bool = False


AttachmentKind = Literal["image", "audio", "document"]
"""What the bot makes of a file: a picture, something to transcribe, something to read."""


MEDIA_GROUP = "media_group_id"
"""``InboundMessage.metadata`` key shared by the messages of one album (Telegram sends each
picture of an album as its own message): the bot answers them as one turn."""

IMAGE_MIMES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
"""Pictures a model takes (re-encoded as JPEG or PNG on the way)."""


def attachment_kind(mime: str) -> AttachmentKind:
    """How a file is treated, from its MIME type: a picture sent as a file is still a picture."""
    mime = mime.split(";", 1)[0].strip().lower()
    if mime in IMAGE_MIMES:
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "document"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message, as the platform describes it: nothing is downloaded yet.

    ``file_id`` is what the adapter needs to fetch it later (``channels.protocol.FileFetcher``),
    so a stored message can be fetched again after a restart. ``size`` is the size the
    platform states (0 when it states none); ``duration`` the seconds of a voice message or
    an audio file, when the platform states them.
    """

    kind: AttachmentKind
    file_id: str
    name: str
    mime: str
    size: int = 0
    duration: int | None = None
    voice: bool = False
    """A voice message recorded in the chat, as opposed to an audio file sent."""


@dataclass(slots=True)
class InboundMessage:
    """One normalized message from a user, whatever platform it came from."""

    chat: ChatRef
    message_id: str
    sender: Sender
    text: str
    # True when the bot is addressed in a group (mention, /cmd@bot, reply to the bot).
    # Adapters decide; the bot only reads it. Always True in DMs.
    addressed: bool = True
    sender_is_admin: bool = False
    reply_to_text: str | None = None
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    metadata: dict[str, str] = field(default_factory=dict)
    attachments: tuple[Attachment, ...] = ()

    @property
    def dedupe_key(self) -> str:
        return f"{self.chat.channel}:{self.chat.chat_id}:{self.message_id}"
