"""Telegram's caption limit: what fits under the file, and the rest for a following message."""

from __future__ import annotations

from channels.telegram._files import MAX_CAPTION_UNITS, split_caption
from channels.telegram._text import utf16_len


def test_a_short_caption_stays_whole() -> None:
    assert split_caption("  Sales, March \n") == ("Sales, March", "")
    assert split_caption("") == ("", "")


def test_a_long_caption_is_cut_on_a_line_and_loses_nothing() -> None:
    first = "x" * 900
    caption = f"{first}\n{'y' * 500}"
    head, rest = split_caption(caption)
    assert (head, rest) == (first, "y" * 500)


def test_the_limit_counts_utf16_units_like_telegram() -> None:
    caption = "😀" * 600  # 1,200 UTF-16 units in 600 characters
    head, rest = split_caption(caption)
    assert utf16_len(head) <= MAX_CAPTION_UNITS
    assert head + rest == caption
