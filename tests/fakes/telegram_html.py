"""Telegram's HTML parse mode, as strict as Telegram, for the fake Bot API.

Telegram refuses a message whose HTML it can't parse ("can't parse entities"): an unsupported
tag, an unbalanced one, a stray ``<`` or an unknown named entity. The fake must refuse the same
messages, or a formatter bug would pass the tests and fail in production.
"""

from __future__ import annotations

import html
import re

__all__ = ["HtmlError", "parse_html"]

_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-spoiler",
    "span",
    "tg-emoji",
}
_TOKEN_RE = re.compile(
    r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>"  # a tag
    r"|<"  # a stray "<": Telegram rejects it
    r"|&(#x[0-9a-fA-F]+|#\d+|\w+);"  # an entity
)
_NAMED_ENTITIES = {"lt", "gt", "amp", "quot"}


class HtmlError(Exception):
    """What Telegram says after "Bad Request: can't parse entities: "."""


def parse_html(text: str) -> str:
    """The visible text of ``text``, or :class:`HtmlError` where Telegram would refuse it."""
    out: list[str] = []
    stack: list[str] = []
    pos = 0
    for match in _TOKEN_RE.finditer(text):
        out.append(text[pos : match.start()])
        pos = match.end()
        token = match.group(0)
        offset = len(text[: match.start()].encode())
        if token == "<":
            raise HtmlError(f"Unexpected character '<' at byte offset {offset}")
        if match.group(4) is not None:
            name = match.group(4)
            if not name.startswith("#") and name not in _NAMED_ENTITIES:
                raise HtmlError(f"Unsupported HTML entity at byte offset {offset}")
            out.append(html.unescape(token))
            continue
        closing, tag = match.group(1) == "/", match.group(2).lower()
        if tag not in _HTML_TAGS:
            raise HtmlError(f'Unsupported start tag "{tag}" at byte offset {offset}')
        if closing:
            if not stack or stack[-1] != tag:
                raise HtmlError(
                    f"Unmatched end tag at byte offset "
                    f'{offset}, expected "</{stack[-1] if stack else ""}>", found "</{tag}>"'
                )
            stack.pop()
        else:
            stack.append(tag)
    if stack:
        raise HtmlError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    out.append(text[pos:])
    return "".join(out)
