"""bot/pipeline/media.py: which attachments are fetched for a run, and what is said about
the rest. Fetching from a platform is tested against the fake Telegram
(tests/e2e/test_telegram_media.py); here, the rules that need no platform."""

from __future__ import annotations

from pathlib import Path

from bot.config import MediaConfig
from bot.pipeline.media import FetchedMedia, Skipped, fetch_media
from channels import Attachment, ChatRef, InboundMessage, Sender
from channels.local import LocalChannel


def message(*attachments: Attachment) -> InboundMessage:
    return InboundMessage(ChatRef("web", "c1"), "m1", Sender("u1"), "hi", attachments=attachments)


PHOTO = Attachment("image", "f1", "a.jpg", "image/jpeg", 10)


async def test_a_channel_that_cannot_fetch_files_skips_them_by_name(tmp_path: Path) -> None:
    media = await fetch_media(
        LocalChannel(), message(PHOTO), workspace=tmp_path, quota=1000, config=MediaConfig()
    )
    assert media == FetchedMedia((), (Skipped("a.jpg", "this channel can't fetch files"),))
    assert not (tmp_path / "inbox").exists()


async def test_a_message_without_attachments_fetches_nothing(tmp_path: Path) -> None:
    media = await fetch_media(
        LocalChannel(), message(), workspace=tmp_path, quota=1000, config=MediaConfig()
    )
    assert media == FetchedMedia()
    assert media.model_text("hi") == "hi"


def test_the_model_text_notes_each_skipped_file() -> None:
    media = FetchedMedia((), (Skipped("a.jpg", "too big"), Skipped("b.jpg", "unreadable")))
    assert media.model_text("look") == (
        "look\n[attachment skipped: a.jpg (too big)]\n[attachment skipped: b.jpg (unreadable)]"
    )
    assert media.model_text("") == (
        "[attachment skipped: a.jpg (too big)]\n[attachment skipped: b.jpg (unreadable)]"
    )
