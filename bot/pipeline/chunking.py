"""Splitting an answer into messages that fit a platform's length limit.

Why split the *markdown* and render each piece, rather than render once and cut the output:
rendered text is full of structure a blind cut breaks — an HTML tag or entity cut in half
(Telegram rejects the whole message), a ``<url|text>`` Slack link split across two messages, a
``<pre>`` opened in one message and closed in the next. Markdown pieces render independently
into complete, balanced output. The cost is that rendering can grow text (``<`` → ``&lt;``,
``**x**`` → ``<b>x</b>``), so :func:`render_chunks` checks every rendered piece and re-splits
the markdown of any that overflow with a proportionally smaller budget.

Boundaries are chosen by preference: paragraph (blank line), line, sentence end, word, then a
hard cut. A fenced code block is never cut while a boundary before it exists; a block longer
than the limit is closed at the end of one chunk and reopened with the same info string at the
start of the next, so every piece still renders as code. Fences are recognised at the start of
a line (any indentation); fences inside blockquotes are treated as ordinary text.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from bot.formatting import render
from channels.types import Formatting

__all__ = ["render_chunks", "split_markdown"]

_FENCE_OPEN = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]]*(?=\s)")
_WORD_BREAK = re.compile(r"[ \t]+")
_LINE_BREAK = re.compile("\n")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\n)+")


@dataclass(frozen=True, slots=True)
class _Fence:
    start: int  # offset of the opening fence line
    end: int  # offset just past the closing fence line (its newline excluded)
    opener: str  # the opening line, e.g. "```python"
    marker: str  # "```" or "~~~~" — the closer must repeat it
    body_start: int
    body_end: int  # offset of the closing line, or of the end of text when unclosed


def split_markdown(text: str, limit: int) -> list[str]:
    """Split markdown into non-empty chunks of at most ``limit`` characters each."""
    if limit < 1:
        raise ValueError("limit must be positive")
    chunks: list[str] = []
    rest = _strip_blank_edges(text)
    while rest:
        if len(rest) <= limit:
            chunk, rest = rest, ""
        else:
            chunk, rest = _cut(rest, limit)
        chunk = _strip_blank_edges(chunk)
        if chunk.strip():
            chunks.append(chunk)
        rest = _strip_blank_edges(rest)
    return chunks


def render_chunks(text: str, flavour: Formatting, limit: int) -> list[str]:
    """Split ``text`` and render each piece for ``flavour``; every result fits in ``limit``."""
    rendered: list[str] = []
    for piece in split_markdown(text, limit):
        rendered.extend(_render_fitting(piece, flavour, limit))
    return rendered


def _render_fitting(markdown: str, flavour: Formatting, limit: int) -> list[str]:
    output = render(markdown, flavour)
    if len(output) <= limit:
        return [output] if output.strip() else []
    # Shrink the markdown budget by the growth factor just observed (with some slack since the
    # growth is uneven). The budget is strictly smaller than the piece, so recursion ends.
    budget = min(len(markdown) - 1, int(len(markdown) * limit / len(output) * 0.9))
    if budget < 1:
        return _hard_split(output, limit)
    fitted: list[str] = []
    for piece in split_markdown(markdown, budget):
        fitted.extend(_render_fitting(piece, flavour, limit))
    return fitted


_ENTITY_OR_TAG = re.compile(r"&[#\w]{1,10};|<[^<>\n]{1,200}>")


def _hard_split(output: str, limit: int) -> list[str]:
    """Last resort for absurdly small limits: cut rendered text, avoiding entities and tags."""
    pieces: list[str] = []
    while len(output) > limit:
        cut = limit
        for match in _ENTITY_OR_TAG.finditer(output, max(0, limit - 210), limit + 210):
            if match.start() < cut < match.end() and match.start() > 0:
                cut = match.start()
        pieces.append(output[:cut])
        output = output[cut:]
    pieces.append(output)
    return [piece for piece in pieces if piece.strip()]


def _cut(text: str, limit: int) -> tuple[str, str]:
    """Cut ``text`` (longer than ``limit``) into a head of at most ``limit`` chars and the rest."""
    fences = _find_fences(text, limit)
    if fences and fences[0].start == 0 and fences[0].end > limit:
        split = _cut_fence(text, fences[0], limit)
        if split is not None:
            return split
    starts = [fence.start for fence in fences]

    def allowed(pos: int) -> bool:
        if not 0 < pos <= limit:
            return False
        index = bisect.bisect_left(starts, pos) - 1  # the last fence opening before pos
        return index < 0 or pos >= fences[index].end

    window = text[: limit + 1]
    # Paragraph and line cuts keep the next line's indentation (it may be meaningful markdown).
    for pattern in (_PARAGRAPH_BREAK, _LINE_BREAK):
        positions = [m.start() for m in pattern.finditer(window) if allowed(m.start())]
        if positions:
            return text[: positions[-1]], text[positions[-1] :]
    # Inside a line the whitespace at the cut is dropped so the next chunk doesn't start with
    # spaces (four of them would turn it into an indented code block).
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    word_breaks = [m.start() for m in _WORD_BREAK.finditer(window)]
    for candidates in (sentence_ends, word_breaks):
        positions = [pos for pos in candidates if allowed(pos)]
        if positions:
            return text[: positions[-1]], text[positions[-1] :].lstrip(" \t")
    return text[:limit], text[limit:]


def _cut_fence(text: str, fence: _Fence, limit: int) -> tuple[str, str] | None:
    """Split a code block that starts the text and is longer than the limit."""
    indent = fence.opener[: len(fence.opener) - len(fence.opener.lstrip(" "))]
    closer = f"\n{indent}{fence.marker}"
    reopen = fence.opener.lstrip(" ") + "\n"
    budget = limit - fence.body_start - len(closer)  # body_start includes the opener's "\n"
    if budget < 1 or len(reopen) >= limit:
        return None  # the fence lines alone don't fit: fall back to a plain cut
    body = text[fence.body_start : fence.body_end]
    newline = body.rfind("\n", 1, budget + 1)
    if newline > 0:
        head, tail = body[:newline], body[newline + 1 :]
    else:  # a single code line longer than the budget
        head, tail = body[:budget], body[budget:]
    return text[: fence.body_start] + head + closer, reopen + tail + text[fence.body_end :]


def _find_fences(text: str, limit: int) -> list[_Fence]:
    """Fenced blocks opening before ``limit`` (the only ones a cut can land in).

    Scanning stops past ``limit``, so a block still open there is reported as running to the end
    of the text: only its start and the fact that it crosses the limit matter.
    """
    fences: list[_Fence] = []
    offset = start = body_start = 0
    opener = marker = ""
    while offset <= len(text):
        if offset > limit and not marker:
            break
        if offset > limit:  # still inside a block that crosses the limit
            fences.append(_Fence(start, len(text), opener, marker, body_start, len(text)))
            return fences
        line_end = text.find("\n", offset)
        line_end = len(text) if line_end == -1 else line_end
        line = text[offset:line_end]
        if not marker:
            match = _FENCE_OPEN.match(line)
            # CommonMark: a backtick fence's info string cannot contain backticks.
            if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
                start, opener, marker = offset, line, match.group(2)
                body_start = min(line_end + 1, len(text))
        else:
            stripped = line.strip()
            if stripped.startswith(marker) and stripped == marker[0] * len(stripped):
                fences.append(_Fence(start, line_end, opener, marker, body_start, offset))
                marker = ""
        offset = line_end + 1
    if marker:
        fences.append(_Fence(start, len(text), opener, marker, body_start, len(text)))
    return fences


def _strip_blank_edges(text: str) -> str:
    """Drop blank lines at both ends but keep the first line's indentation (linear time)."""
    leading = _LEADING_BLANK_LINES.match(text)
    if leading:
        text = text[leading.end() :]
    newline = text.find("\n", len(text.rstrip()))
    return text if newline == -1 else text[:newline]
