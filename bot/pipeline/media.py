"""A message's attachments, fetched for its run: limits, download, the workspace, the model.

Each attachment is judged by the size its platform states before anything is downloaded
(``media.max_bytes``), and only the first ``media.max_attachments`` are fetched. A fetched file
is saved under ``inbox/`` in the user's workspace, then made into what the model reads: an image
part (``agent_core.images``), a transcript (``agent_core.Transcriber``) or a document's text
(``agent_core.documents``, see :mod:`bot.pipeline.media_text`). Whatever is skipped (too large,
one too many, unreadable, not transcribed, no room) is named twice: in one short reply from the
service, and as a note in the text the model gets, so its answer to the rest of the message
knows what it is missing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent_core import (
    AgentError,
    DocumentEncrypted,
    DocumentUnreadable,
    ImagePart,
    ImageUnreadable,
    WorkspaceFull,
    document_kind,
    extract_text,
    prepare_image,
    save_inbox_file,
)
from agent_core.providers import Transcriber
from bot.config import OPENAI_BASE_URL, Config, MediaConfig
from bot.pipeline.media_text import document_text, transcript_text
from channels import (
    IMAGE_MIMES,
    Attachment,
    Channel,
    ChannelError,
    FileFetcher,
    FileTooLarge,
    InboundMessage,
)

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Skipped:
    name: str
    reason: str
    saved: str | None = None
    """Where the file was saved anyway (the file tools can still read it)."""

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"

    def note(self) -> str:
        where = f"; saved to {self.saved}" if self.saved else ""
        return f"[attachment skipped: {self}{where}]"


@dataclass(frozen=True, slots=True)
class FetchedMedia:
    images: tuple[ImagePart, ...] = ()
    texts: tuple[str, ...] = ()
    """Transcripts and documents' texts, as the model reads them after the message."""
    skipped: tuple[Skipped, ...] = ()

    def model_text(self, text: str) -> str:
        """``text``, then the transcripts and documents, then a note per skipped attachment."""
        parts = [*([text] if text else []), *self.texts, *(s.note() for s in self.skipped)]
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class _Read:
    """An attachment made into text for the model."""

    text: str


@dataclass(frozen=True, slots=True)
class MediaContext:
    """What fetching needs besides the message: where files go, and who transcribes."""

    workspace: Path
    quota: int
    config: MediaConfig
    transcriber: Transcriber | None = None


async def fetch_media(channel: Channel, msg: InboundMessage, context: MediaContext) -> FetchedMedia:
    if not msg.attachments:
        return FetchedMedia()
    images: list[ImagePart] = []
    texts: list[str] = []
    skipped: list[Skipped] = []
    limit = context.config.max_attachments
    for index, attachment in enumerate(msg.attachments):
        if index >= limit:
            skipped.append(Skipped(attachment.name, f"over {limit} attachments"))
            continue
        outcome = await _fetch_one(channel, attachment, context)
        if isinstance(outcome, Skipped):
            log.info("media.skipped", name=outcome.name, reason=outcome.reason)
            skipped.append(outcome)
        elif isinstance(outcome, _Read):
            texts.append(outcome.text)
        else:
            images.append(outcome)
    return FetchedMedia(tuple(images), tuple(texts), tuple(skipped))


async def _fetch_one(
    channel: Channel, attachment: Attachment, context: MediaContext
) -> ImagePart | _Read | Skipped:
    name = attachment.name
    limit = int(context.config.max_bytes)
    if attachment.size > limit:
        return Skipped(name, f"{_mb(attachment.size)}, over the {_mb(limit)} limit")
    if not isinstance(channel, FileFetcher):
        return Skipped(name, "this channel can't fetch files")
    try:
        data = await channel.fetch_file(attachment, max_bytes=limit)
    except FileTooLarge as exc:  # a platform that stated no size (or a wrong one)
        return Skipped(name, f"{_mb(exc.size)}, over the {_mb(limit)} limit")
    except ChannelError as exc:
        log.warning("media.fetch_failed", name=name, error=str(exc))
        return Skipped(name, "could not be downloaded")
    if len(data) > limit:  # an adapter that read it all anyway
        return Skipped(name, f"{_mb(len(data))}, over the {_mb(limit)} limit")
    path = await _save(context, name, data)
    if isinstance(path, Skipped):
        return path
    if attachment.kind == "image" or attachment.mime.lower() in IMAGE_MIMES:
        try:
            return await asyncio.to_thread(prepare_image, data, name=name, path=path)
        except ImageUnreadable as exc:
            log.info("media.unreadable", name=name, error=str(exc))
            return Skipped(name, "not a readable image", path)
    if attachment.kind == "audio":
        return await _transcribe(attachment, data, path, context.transcriber)
    return await _read_document(attachment, data, path, context)


async def _save(context: MediaContext, name: str, data: bytes) -> str | Skipped:
    try:
        return await asyncio.to_thread(
            save_inbox_file, context.workspace, name, data, context.quota
        )
    except WorkspaceFull:
        return Skipped(name, "the workspace is full")
    except (AgentError, OSError) as exc:
        log.warning("media.save_failed", name=name, error=str(exc))
        return Skipped(name, "could not be saved")


async def _transcribe(
    attachment: Attachment, data: bytes, path: str, transcriber: Transcriber | None
) -> _Read | Skipped:
    if transcriber is None:
        return Skipped(attachment.name, "no transcription service is configured", path)
    try:
        # The bytes as sent: Whisper-compatible servers take OGG/Opus, MP3, M4A, WAV as they are.
        transcript = await transcriber.transcribe(
            data, filename=attachment.name, mime=attachment.mime
        )
    except AgentError as exc:
        log.warning("media.transcription_failed", name=attachment.name, error=str(exc))
        return Skipped(attachment.name, "could not be transcribed", path)
    return _Read(transcript_text(attachment, transcript, path))


async def _read_document(
    attachment: Attachment, data: bytes, path: str, context: MediaContext
) -> _Read | Skipped:
    name = attachment.name
    if document_kind(name, attachment.mime) is None:
        return Skipped(name, f"unsupported file type {attachment.mime or 'unknown'}", path)
    try:
        extracted = await asyncio.to_thread(extract_text, data, name=name, mime=attachment.mime)
    except DocumentEncrypted:
        return Skipped(name, "encrypted PDF", path)
    except DocumentUnreadable as exc:
        log.info("media.unreadable", name=name, error=str(exc))
        return Skipped(name, "not a readable document", path)
    max_chars = context.config.document_max_chars
    full_path: str | None = None
    if len(extracted.text) > max_chars:
        # The whole text goes to the workspace, where the file tools read it in pieces.
        saved = await _save(context, f"{name}.txt", extracted.text.encode())
        full_path = saved if isinstance(saved, str) else None
    return _Read(document_text(name, path, extracted, max_chars=max_chars, full_path=full_path))


def build_transcriber(config: Config) -> Transcriber | None:
    """The transcription API of ``media.transcription`` (default: the default provider's
    base_url and api_key), or None where there is none: an Anthropic provider has no such
    endpoint, and OpenAI's own needs a key."""
    settings = config.media.transcription
    name = settings.provider or config.providers.default
    provider = config.providers.all()[name]
    if provider.kind != "openai":
        return None
    if provider.base_url.rstrip("/") == OPENAI_BASE_URL and not provider.api_key:
        return None
    return Transcriber(
        provider.base_url,
        provider.api_key,
        model=settings.model,
        name=f"{name}/transcription",
        timeout=settings.timeout,
    )


def _mb(size: int) -> str:
    if size < 1 << 20:
        return f"{max(1, round(size / 1024))} KB"
    return f"{size / (1 << 20):.1f} MB"
