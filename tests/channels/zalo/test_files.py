"""What a Zalo chat gets for a file: the note (name, size, why, the caption, in one message),
and a long caption split for the messages after a photo."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.zalo._client import MAX_TEXT_CHARS
from channels.zalo._files import MAX_PHOTO_BYTES, file_note, read_picture, size_text, split_text


def test_a_document_note() -> None:
    note = file_note("a.pdf", 2_500_000, "no_file_sending", "")
    assert note == "[file: a.pdf, 2.5 MB — not sent: Zalo bots can't send files]"


def test_a_caption_too_long_for_one_message_is_cut_and_the_note_kept() -> None:
    note = file_note("p.png", 10, "no_public_link", "w" * 5000)
    assert len(note) == MAX_TEXT_CHARS
    assert note.startswith("www") and "…\n[file: p.png, 10 B — not sent:" in note
    assert note.endswith("a Zalo bot can send a picture only from a public link]")


def test_split_text_cuts_at_spaces_within_the_limit() -> None:
    text = " ".join(["word"] * 1000)  # 4,999 characters
    pieces = split_text(text)
    assert all(len(p) <= MAX_TEXT_CHARS for p in pieces)
    assert " ".join(pieces) == text
    assert split_text("  short  ") == ["short"] and split_text("") == []


def test_read_picture_refuses_a_link_and_an_oversized_file(tmp_path: Path) -> None:
    real = tmp_path / "real.jpg"
    real.write_bytes(b"jpeg")
    (tmp_path / "link.jpg").symlink_to(real)
    assert read_picture(real) == b"jpeg"
    with pytest.raises(OSError):
        read_picture(tmp_path / "link.jpg")
    big = tmp_path / "big.jpg"
    with big.open("wb") as out:
        out.truncate(MAX_PHOTO_BYTES + 1)
    with pytest.raises(OSError):
        read_picture(big)


def test_size_text() -> None:
    assert [size_text(n) for n in (5, 12_345, 7_000_000)] == ["5 B", "12 KB", "7.0 MB"]
