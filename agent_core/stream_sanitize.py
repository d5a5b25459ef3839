"""The part of a streamed answer that may be shown before the answer is complete.

The final answer goes through :func:`~agent_core.sanitize.sanitize_output`; while it is being
written, :func:`safe_preview` decides what is visible so that nothing the sanitizer would hide
is ever shown, not even for one edit:

- the text is sanitized as if it were complete, which already drops a ``<think>`` or tool-call
  block that is open at the end;
- an unfinished tag at the end (``<`` up to an unclosed ``>``, e.g. ``<thi``) is held back:
  it may become a hidden block;
- an unfinished last line that could still become a marker the sanitizer removes
  (``[Tool Call:``, ``[System Message]`` …) is held back;
- a last paragraph that so far repeats the previous one is held back (it may be a stutter);
- a text that could still become ``NO_REPLY`` shows nothing.

Known limit: a model that writes its reasoning as plain text and only then a lone ``</think>``
(the opener was in the prompt) can't be told from an answer until the closing tag arrives.
"""

from __future__ import annotations

import re

from agent_core.run import NO_REPLY
from agent_core.sanitize import sanitize_output

_MARKERS = ("[tool call:", "[tool result", "[historical context:", "[system message]")
_OPEN_TAG_AT_END = re.compile(r"<(/?)([A-Za-z_:-]*)([^<>]*)\Z")
# Tags whose blocks the sanitizer hides or removes (agent_core/sanitize.py).
_HIDDEN_TAGS = (
    "think",
    "thinking",
    "thought",
    "antthinking",
    "final",
    "parameter",
    "tool_call",
    "tool_calls",
    "function_call",
    "function_calls",
    "tool_use",
    "invoke",
    "minimax:tool_call",
)


def safe_preview(raw: str) -> str:
    """What may be shown of the answer written so far (see the module docstring)."""
    text = _hold_unfinished_tag(raw)
    text = _hold_unfinished_marker(text)
    text = _hold_stutter(text)
    shown = sanitize_output(text)
    if could_become_no_reply(shown):
        return ""
    return shown


def could_become_no_reply(text: str) -> bool:
    """Empty, or a prefix of NO_REPLY (``N``, ``NO_``, ``NO_REPL`` …)."""
    stripped = text.strip()
    return NO_REPLY.startswith(stripped)


def _hold_unfinished_tag(text: str) -> str:
    """Cut an unclosed tag at the end that is, or may still become, a hidden one. ``x < y``
    is no tag and stays visible."""
    match = _OPEN_TAG_AT_END.search(text)
    if match is None:
        return text
    name, rest = match.group(2).lower(), match.group(3)
    typing_name = not rest  # the name may still grow
    if (typing_name and any(tag.startswith(name) for tag in _HIDDEN_TAGS)) or (
        name in _HIDDEN_TAGS and (not rest or rest[0].isspace() or rest[0] == "/")
    ):
        return text[: match.start()]
    return text


def _hold_unfinished_marker(text: str) -> str:
    start = text.rfind("\n") + 1
    last = text[start:].lstrip().lower()
    if last and any(m.startswith(last) or last.startswith(m) for m in _MARKERS):
        return text[:start]
    return text


def _hold_stutter(text: str) -> str:
    head, sep, last = text.rpartition("\n\n")
    if not sep or not last.strip():
        return text
    previous = head.rpartition("\n\n")[2].strip()
    if previous and previous.startswith(last.strip()):
        return head
    return text
