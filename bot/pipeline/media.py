"""A message's attachments, fetched for its run: limits, download, the workspace, the model.

Each attachment is judged by the size its platform states before anything is downloaded
(``media.max_bytes``), and only the first ``media.max_attachments`` are fetched. A fetched image
is saved under ``inbox/`` in the user's workspace and prepared for the model
(``agent_core.images``). Whatever is skipped (too large, one too many, unreadable, no room) is
named twice: in a short reply from the service, and as a note in the text the model gets, so
its answer to the rest of the message knows what it is missing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent_core import (
    AgentError,
    ImagePart,
    ImageUnreadable,
    WorkspaceFull,
    prepare_image,
    save_inbox_file,
)
from bot.config import MediaConfig
from channels import Attachment, Channel, ChannelError, FileFetcher, InboundMessage

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Skipped:
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


@dataclass(frozen=True, slots=True)
class FetchedMedia:
    images: tuple[ImagePart, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def model_text(self, text: str) -> str:
        """``text`` with a note for each skipped attachment."""
        notes = [f"[attachment skipped: {s}]" for s in self.skipped]
        return "\n".join([text, *notes] if text else notes)


async def fetch_media(
    channel: Channel,
    msg: InboundMessage,
    *,
    workspace: Path,
    quota: int,
    config: MediaConfig,
) -> FetchedMedia:
    if not msg.attachments:
        return FetchedMedia()
    images: list[ImagePart] = []
    skipped: list[Skipped] = []
    for index, attachment in enumerate(msg.attachments):
        if index >= config.max_attachments:
            skipped.append(Skipped(attachment.name, f"over {config.max_attachments} attachments"))
            continue
        outcome = await _fetch_one(channel, attachment, workspace, quota, config)
        if isinstance(outcome, Skipped):
            log.info("media.skipped", name=outcome.name, reason=outcome.reason)
            skipped.append(outcome)
        else:
            images.append(outcome)
    return FetchedMedia(tuple(images), tuple(skipped))


async def _fetch_one(
    channel: Channel, attachment: Attachment, workspace: Path, quota: int, config: MediaConfig
) -> ImagePart | Skipped:
    name = attachment.name
    limit = int(config.max_bytes)
    if attachment.size > limit:
        return Skipped(name, f"{_mb(attachment.size)}, over the {_mb(limit)} limit")
    if not isinstance(channel, FileFetcher):
        return Skipped(name, "this channel can't fetch files")
    try:
        data = await channel.fetch_file(attachment)
    except ChannelError as exc:
        log.warning("media.fetch_failed", name=name, error=str(exc))
        return Skipped(name, "could not be downloaded")
    if len(data) > limit:  # a platform that stated no size (or a wrong one)
        return Skipped(name, f"{_mb(len(data))}, over the {_mb(limit)} limit")
    try:
        path = await asyncio.to_thread(save_inbox_file, workspace, name, data, quota)
    except WorkspaceFull:
        return Skipped(name, "the workspace is full")
    except (AgentError, OSError) as exc:
        log.warning("media.save_failed", name=name, error=str(exc))
        return Skipped(name, "could not be saved")
    try:
        return await asyncio.to_thread(prepare_image, data, name=name, path=path)
    except ImageUnreadable as exc:
        log.info("media.unreadable", name=name, error=str(exc))
        return Skipped(name, "not a readable image")


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"
