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


class FilesChannel(LocalChannel):
    """A channel that serves files from memory (the platforms' own fetching is tested
    against their fakes)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__()
        self.files = files

    async def fetch_file(self, attachment: Attachment, *, max_bytes: int | None = None) -> bytes:
        return self.files[attachment.file_id]


VOICE = Attachment("audio", "v1", "voice_1.ogg", "audio/ogg", 4, duration=3, voice=True)


async def test_audio_without_a_transcription_service_is_saved_and_named(tmp_path: Path) -> None:
    channel = FilesChannel({"v1": b"OggS"})
    media = await fetch_media(channel, message(VOICE), MediaContext(tmp_path, 1000, MediaConfig()))
    assert media.skipped == (
        Skipped("voice_1.ogg", "no transcription service is configured", "inbox/voice_1.ogg"),
    )
    assert (tmp_path / "inbox" / "voice_1.ogg").read_bytes() == b"OggS"


async def test_a_full_workspace_skips_the_file(tmp_path: Path) -> None:
    channel = FilesChannel({"v1": b"OggS"})
    media = await fetch_media(channel, message(VOICE), MediaContext(tmp_path, 3, MediaConfig()))
    assert media.skipped == (Skipped("voice_1.ogg", "the workspace is full"),)


async def test_a_long_text_that_does_not_fit_the_quota_is_still_shown_in_part(
    tmp_path: Path,
) -> None:
    text = "word " * 100  # 500 bytes: the file fits the quota, its copy as .txt does not
    notes = Attachment("document", "d1", "n.txt", "text/plain", len(text))
    channel = FilesChannel({"d1": text.encode()})
    config = MediaConfig(document_max_chars=100)
    media = await fetch_media(channel, message(notes), MediaContext(tmp_path, 700, config))
    (read,) = media.texts
    assert read.startswith("[document: n.txt, saved to inbox/n.txt]\nword word")
    assert read.endswith("the whole text could not be saved (the workspace is full)]")
    assert not (tmp_path / "inbox" / "n.txt.txt").exists()
