"""Long markdown across Slack messages: how much one message holds, where to cut, and the
code block a cut leaves open (closed at the end of one message, reopened in the next).

``markdown_text`` takes :data:`SLACK_MARKDOWN_LIMIT` characters per call, and an edited markdown
message holds as many. A message is kept under :data:`MESSAGE_CHARS` (some margin for characters
Slack counts differently) and cut at a paragraph or line break when it can.
"""

from __future__ import annotations

import re

SLACK_MARKDOWN_LIMIT = 12_000
"""Characters of ``markdown_text`` Slack takes per call, and per message on ``chat.update``."""
MESSAGE_CHARS = 10_000
"""What one streamed message holds at most (margin for characters Slack counts twice)."""
RESERVE = 64
"""Room kept free in a message for a closing code fence or a marker such as " (stopped)"."""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
MAX_FENCE_LINE = 200
"""A longer opening line is repeated in the next message as its bare fence (``` or ~~~)."""


def open_fence(text: str) -> str | None:
    """The opening line of the code block ``text`` ends inside, if any."""
    opener: str | None = None
    marker = ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if match is None:
            continue
        run, info = match.group(1), match.group(2)
        if opener is None:
            if run[0] == "`" and "`" in info:
                continue  # ``` followed by more backticks on the line: inline code, not a fence
            opener, marker = line.strip(), run
        elif run[0] == marker[0] and len(run) >= len(marker) and not info.strip():
            opener = None
    return opener


def fence_closer(body: str, opener: str) -> str:
    marker = re.match(r"[`~]+", opener)
    run = marker.group() if marker else "```"
    return ("" if body.endswith("\n") else "\n") + run


def fit(rest: str, room: int, *, used: int) -> int:
    """How many characters of ``rest`` go into a message that already holds ``used`` and has
    ``room`` left: all when they fit, else up to a paragraph break, a line break or a space that
    leaves the message at least half full; 0 (end the message as it is) when there is none and it
    is half full already; else as many as fit."""
    if len(rest) <= room:
        return len(rest)
    if room <= 0:
        return 0
    window = rest[:room]
    half = MESSAGE_CHARS // 2 - used
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > 0 and at + len(separator) >= half:
            return at + len(separator)
    return 0 if half <= 0 else room


def split_for_messages(text: str) -> list[str]:
    """``text`` in message-sized parts, split like a stream splits it."""
    parts: list[str] = []
    rest = text.lstrip("\n")
    opener = ""
    while rest:
        prefix = opener + "\n" if opener else ""
        n = fit(rest, MESSAGE_CHARS - RESERVE - len(prefix), used=len(prefix))
        n = n or len(rest[: MESSAGE_CHARS - RESERVE - len(prefix)])
        part = prefix + rest[:n]
        rest = rest[n:].lstrip("\n")
        opener = (open_fence(part) or "") if rest else ""
        if len(opener) > MAX_FENCE_LINE:
            # Still closed here and reopened there, or the rest would not show as code.
            bare = re.match(r"[`~]+", opener)
            opener = bare.group() if bare else "```"
        parts.append(part + (fence_closer(part, opener) if opener else ""))
    return parts
