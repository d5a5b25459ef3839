"""``media``: attachments users send (photos today), their limits and replies."""

from __future__ import annotations

from pydantic import ByteSize, Field

from bot.config.base import StrictModel


class MediaConfig(StrictModel):
    max_bytes: ByteSize = Field(ByteSize(20 << 20), gt=0)
    """Largest attachment fetched, judged from the size the platform states before any
    download (20 MiB is also Telegram's ``getFile`` limit)."""
    max_attachments: int = Field(10, ge=0)
    """Attachments of one message that are fetched; the rest are skipped with a reply."""
    skipped_reply: str = "Skipped: {items}."
    """The service's own reply naming what it could not pass on (``{items}``); the text of
    the message is still answered. Empty: no reply."""
