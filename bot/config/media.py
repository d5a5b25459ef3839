"""``media``: attachments users send (photos, voice and audio, documents), limits and replies."""

from __future__ import annotations

from pydantic import ByteSize, Field

from bot.config.base import StrictModel


class TranscriptionConfig(StrictModel):
    """Where voice messages and audio files are turned into text: an OpenAI-compatible
    ``POST {base_url}/audio/transcriptions``."""

    provider: str | None = None
    """A name under ``providers`` whose ``base_url`` and ``api_key`` are used; default: the
    default provider (``providers.default``)."""
    model: str = "whisper-1"
    timeout: float = Field(120.0, gt=0)
    """Seconds to wait for the transcription (read timeout)."""


class MediaConfig(StrictModel):
    max_bytes: ByteSize = Field(ByteSize(20 << 20), gt=0)
    """Largest attachment fetched, judged from the size the platform states before any
    download (20 MiB is also Telegram's ``getFile`` limit)."""
    max_attachments: int = Field(10, ge=0)
    """Attachments of one message that are fetched; the rest are skipped with a reply."""
    skipped_reply: str = "Skipped: {items}."
    """The service's own reply naming what it could not pass on (``{items}``); the text of
    the message is still answered. Empty: no reply."""
    document_max_chars: int = Field(8000, ge=100)
    """Characters of a document's text put in the prompt; a longer text is saved whole in
    the workspace (``inbox/<name>.txt``) and the model gets its start and the path."""
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
