"""channels/telegram/_text.py: the plain-text fallback and splitting in UTF-16 units."""

from __future__ import annotations

from channels.telegram._text import html_to_plain, split_units


def test_plain_fallback_and_utf16_split() -> None:
    assert html_to_plain("<b>a &lt; b</b> &amp; <a href='x'>c</a>") == "a < b & c"
    pieces = split_units("😀" * 10, 6)
    assert "".join(pieces) == "😀" * 10
    assert all(len(p.encode("utf-16-le")) // 2 <= 6 for p in pieces)
