"""bot/pipeline/media.py: which attachments are fetched for a run, and what is said about
the rest. Fetching from a platform is tested against the fake Telegram
(tests/e2e/test_telegram_media.py); here, the rules that need no platform."""

from __future__ import annotations

from pathlib import Path

from bot.config import MediaConfig, parse_config
from bot.pipeline.media import FetchedMedia, MediaContext, Skipped, build_transcriber, fetch_media
from channels import Attachment, ChatRef, InboundMessage, Sender
from channels.local import LocalChannel


def message(*attachments: Attachment) -> InboundMessage:
    return InboundMessage(ChatRef("web", "c1"), "m1", Sender("u1"), "hi", attachments=attachments)


PHOTO = Attachment("image", "f1", "a.jpg", "image/jpeg", 10)


async def test_a_channel_that_cannot_fetch_files_skips_them_by_name(tmp_path: Path) -> None:
    media = await fetch_media(
        LocalChannel(), message(PHOTO), MediaContext(tmp_path, 1000, MediaConfig())
    )
    assert media == FetchedMedia(skipped=(Skipped("a.jpg", "this channel can't fetch files"),))
    assert not (tmp_path / "inbox").exists()


async def test_a_message_without_attachments_fetches_nothing(tmp_path: Path) -> None:
    media = await fetch_media(
        LocalChannel(), message(), MediaContext(tmp_path, 1000, MediaConfig())
    )
    assert media == FetchedMedia()
    assert media.model_text("hi") == "hi"


def test_the_model_text_notes_each_skipped_file() -> None:
    media = FetchedMedia(skipped=(Skipped("a.jpg", "too big"), Skipped("b.jpg", "unreadable")))
    assert media.model_text("look") == (
        "look\n[attachment skipped: a.jpg (too big)]\n[attachment skipped: b.jpg (unreadable)]"
    )
    assert media.model_text("") == (
        "[attachment skipped: a.jpg (too big)]\n[attachment skipped: b.jpg (unreadable)]"
    )


def test_transcripts_come_after_the_text_and_before_the_notes() -> None:
    media = FetchedMedia(
        texts=("[voice message, 0:02] hi",),
        skipped=(Skipped("b.pdf", "encrypted PDF", "inbox/b.pdf"),),
    )
    assert media.model_text("look") == (
        "look\n[voice message, 0:02] hi\n"
        "[attachment skipped: b.pdf (encrypted PDF); saved to inbox/b.pdf]"
    )


def test_the_transcriber_is_the_default_providers_unless_named() -> None:
    providers = {
        "default": "local",
        "local": {"base_url": "http://127.0.0.1:11434/v1", "api_key": "k1"},
        "speech": {"base_url": "http://127.0.0.1:9000/v1/", "api_key": "k2"},
    }
    default = build_transcriber(parse_config({"providers": providers}, {}))
    assert default is not None
    assert (default.url, default.model) == (
        "http://127.0.0.1:11434/v1/audio/transcriptions",
        "whisper-1",
    )
    media = {"transcription": {"provider": "speech", "model": "distil-whisper"}}
    named = build_transcriber(parse_config({"providers": providers, "media": media}, {}))
    assert named is not None
    assert (named.url, named.model) == (
        "http://127.0.0.1:9000/v1/audio/transcriptions",
        "distil-whisper",
    )


def test_no_transcriber_without_an_openai_compatible_endpoint() -> None:
    # OpenAI's own API without a key (the offline start), and Anthropic, which has none.
    assert build_transcriber(parse_config({}, {})) is None
    anthropic = {"default": "claude", "claude": {"kind": "anthropic", "api_key": "k"}}
    assert build_transcriber(parse_config({"providers": anthropic}, {})) is None
