"""Telegram's text units: what a reader sees of our HTML, and lengths in UTF-16 code units
(Telegram counts those, not characters, against its 4,096 limit)."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>]*>")


def html_to_plain(text: str) -> str:
    """Telegram HTML → the text a reader would see (tags dropped, entities decoded)."""
    return html.unescape(_TAG.sub("", text))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_units(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` UTF-16 units, preferring line breaks."""
    pieces: list[str] = []
    rest = text
    while utf16_len(rest) > limit:
        cut = len(rest)
        while utf16_len(rest[:cut]) > limit:
            cut = max(1, cut * limit // max(1, utf16_len(rest[:cut])) - 1)
        newline = rest.rfind("\n", 0, cut)
        space = rest.rfind(" ", 0, cut)
        point = newline if newline > cut // 2 else space if space > cut // 2 else cut
        pieces.append(rest[:point])
        rest = rest[point:].lstrip("\n ")
    if rest:
        pieces.append(rest)
    return pieces
