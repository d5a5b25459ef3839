"""Markdown → chat-platform text.

The model answers in Markdown; each channel wants its own flavour (see
:data:`channels.types.Formatting`). One parser (markdown-it-py) builds a syntax tree and a small
renderer per flavour walks it, so every construct is handled once per platform instead of by
regex rewriting of the source.
"""

from __future__ import annotations

import re

import structlog

# Note: importing the `html` submodule binds `bot.formatting.html` in this namespace, which is
# why the stdlib `html` module is not imported here.
from bot.formatting.html import HtmlRenderer, escape
from bot.formatting.mrkdwn import MrkdwnRenderer, escape_keeping_tokens
from bot.formatting.plain import PlainRenderer
from channels.types import Formatting

__all__ = ["render"]

log = structlog.get_logger(__name__)


# What can make one line of text anything but a paragraph of itself: inline markup, escapes,
# entities and raw HTML, block starts (quote, heading, list, rule, table) and edge whitespace
# (trimmed). Short answers are most answers, and parsing one costs more than all the rest of
# sending it; a text this rejects simply takes the parser (tests compare both on such texts).
_MARKUP = re.compile(r"[\\`*_\[\]<>&~|#\n\r\t]|^\s|\s$|^[-+=]|^\d{1,9}[.)]")


def render(markdown: str, flavour: Formatting) -> str:
    """Render the model's markdown for a platform. Never raises."""
    if flavour == "markdown":  # web/CLI render markdown themselves
        return markdown
    if markdown and _MARKUP.search(markdown) is None:
        return _unformatted(markdown, flavour)
    try:
        if flavour == "html":
            return HtmlRenderer().render(markdown)
        if flavour == "mrkdwn":
            return MrkdwnRenderer().render(markdown)
        return PlainRenderer().render(markdown)
    except Exception:  # a formatting bug must not lose the answer: send it unformatted
        log.exception("markdown_render_failed", flavour=flavour, length=len(markdown))
        return _unformatted(markdown, flavour)


def _unformatted(markdown: str, flavour: Formatting) -> str:
    if flavour == "html":
        return escape(markdown)
    if flavour == "mrkdwn":
        return escape_keeping_tokens(markdown)
    return markdown
