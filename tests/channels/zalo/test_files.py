"""The note a Zalo chat gets instead of a file: name, size, why, and the caption, in one
message."""

from __future__ import annotations

from pathlib import Path

from channels.zalo._client import MAX_TEXT_CHARS
from channels.zalo._files import file_note, size_text


async def test_a_document_note(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(bytes(2_500_000))
    note = await file_note(path, name="a.pdf", mime="application/pdf", caption="")
    assert note == "[file: a.pdf, 2.5 MB — not sent: Zalo bots can't send files]"


async def test_a_caption_too_long_for_one_message_is_cut_and_the_note_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.png"
    path.write_bytes(b"x" * 10)
    note = await file_note(path, name="p.png", mime="image/png", caption="w" * 5000)
    assert len(note) == MAX_TEXT_CHARS
    assert note.startswith("www") and "…\n[file: p.png, 10 B — not sent:" in note
    assert note.endswith("a Zalo bot can send a picture only from a public link]")


def test_size_text() -> None:
    assert [size_text(n) for n in (5, 12_345, 7_000_000)] == ["5 B", "12 KB", "7.0 MB"]
