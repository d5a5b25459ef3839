"""bot/pipeline/media_text.py: how transcripts and documents read for the model."""

from __future__ import annotations

import pytest

from agent_core import ExtractedText
from bot.pipeline.media_text import document_text, duration_label, transcript_text
from channels import Attachment


@pytest.mark.parametrize(
    ("seconds", "label"), [(0, "0:00"), (14, "0:14"), (185, "3:05"), (3723, "1:02:03")]
)
def test_durations(seconds: int, label: str) -> None:
    assert duration_label(seconds) == label


def test_a_voice_message_and_an_audio_file() -> None:
    voice = Attachment("audio", "f", "voice_7.ogg", "audio/ogg", duration=14, voice=True)
    assert transcript_text(voice, "hi", "inbox/voice_7.ogg") == (
        "[voice message, 0:14] hi\n[the audio is saved to inbox/voice_7.ogg]"
    )
    song = Attachment("audio", "f", "song.mp3", "audio/mpeg")  # no duration stated
    assert transcript_text(song, "", "inbox/song.mp3").startswith(
        "[audio file song.mp3] (no speech recognized)\n"
    )


def test_a_pdf_cut_by_the_page_cap_says_so() -> None:
    extracted = ExtractedText("text", pages=120, pages_read=50)
    assert document_text("m.pdf", "inbox/m.pdf", extracted, max_chars=100, full_path=None) == (
        "[document: m.pdf, 120 pages, the first 50 read, saved to inbox/m.pdf]\ntext"
    )


def test_a_document_without_text() -> None:
    extracted = ExtractedText("  ", pages=1, pages_read=1)
    assert document_text(
        "scan.pdf", "inbox/scan.pdf", extracted, max_chars=100, full_path=None
    ) == (
        "[document: scan.pdf, 1 page, saved to inbox/scan.pdf]\n"
        "[no text could be extracted from it]"
    )


def test_a_long_text_that_could_not_be_saved_whole_says_so() -> None:
    text = document_text(
        "a.txt", "inbox/a.txt", ExtractedText("x" * 300), max_chars=100, full_path=None
    )
    assert text.endswith(
        "[a.txt: only the first 100 of 300 characters are shown; "
        "the whole text could not be saved (the workspace is full)]"
    )
    assert "\n" + "x" * 100 + "\n[a.txt" in text
