"""One line without markdown syntax skips the parser (bot/formatting/__init__.py): the result
must be exactly what the parser and each flavour's renderer make of it."""

from __future__ import annotations

import random

import pytest

from bot.formatting import _MARKUP, render
from bot.formatting.html import HtmlRenderer
from bot.formatting.mrkdwn import MrkdwnRenderer
from bot.formatting.plain import PlainRenderer

RENDERERS = {"html": HtmlRenderer, "mrkdwn": MrkdwnRenderer, "plain": PlainRenderer}
ALPHABET = "abcXYZ019 .,:;!?'\"()/@%$^{}=+-é中😀\u00a0"
TRICKY = [
    "echo: c100000 m0",
    "Sure! It costs $5 (or 4 €).",
    'He said "hi" - then left.',
    "3.5 is more than 3",
    "1. first",
    "- item",
    "+ item",
    "== title",
    "a_b_c",
    "snake_case and *stars*",
    "x < y && y > z",
    "see https://example.com/a_b?x=1",
    "trailing space ",
    "\u00a0leading nbsp",
    "tab\there",
]


def _full(text: str, flavour: str) -> str:
    return RENDERERS[flavour]().render(text)


@pytest.mark.parametrize("flavour", sorted(RENDERERS))
def test_fast_path_matches_the_parser(flavour: str) -> None:
    rng = random.Random(16)
    texts = TRICKY + [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(3000)
    ]
    fast = [t for t in texts if _MARKUP.search(t) is None]
    assert len(fast) > 500  # the check lets ordinary text through, not just nothing
    for text in fast:
        assert render(text, flavour) == _full(text, flavour), repr(text)  # type: ignore[arg-type]


def test_markup_takes_the_parser() -> None:
    assert render("a *b*", "html") == "a <i>b</i>"
    assert render("1. first", "plain") == _full("1. first", "plain")
    assert render("- item", "html") == _full("- item", "html")
