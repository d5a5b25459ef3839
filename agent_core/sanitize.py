"""Cleaning the model's final answer before anyone sees it (spec section 3).

Seven steps, in this order, each a small function tested on its own:

1. :func:`strip_garbled_tool_xml` - tool-call XML some models print as text;
2. :func:`strip_downgraded_tool_calls` - ``[Tool Call: ...]`` lines and their JSON arguments;
3. :func:`strip_thinking_tags` - think/thinking/thought/antThinking blocks;
4. :func:`strip_final_tags` - ``<final>`` wrappers (the inside is kept);
5. :func:`strip_echoed_system_messages` - ``[System Message]`` blocks the model echoes;
6. :func:`collapse_duplicate_paragraphs` - a paragraph repeated back to back (stutter);
7. :func:`strip_leading_blank_lines` - blank lines at the start (indentation is kept).

An answer made only of such garbage comes out empty, and an empty answer is never delivered.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TOOL_TAGS = (
    r"(?:minimax:tool_call|tool_call|tool_calls|function_call|function_calls|tool_use|invoke)"
)
_TOOL_BLOCK = re.compile(rf"<({_TOOL_TAGS})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_PARAMETER = re.compile(r"<parameter\b[^>]*>.*?</parameter\s*>", re.IGNORECASE | re.DOTALL)
# A tag left over after the blocks went (unclosed opener, stray closer, lone <parameter ...>).
_TOOL_TAG = re.compile(rf"</?(?:{_TOOL_TAGS}|parameter)\b[^>]*>", re.IGNORECASE)
# An opener that was never closed: the rest of the answer is the tool call.
_TOOL_UNCLOSED = re.compile(rf"<{_TOOL_TAGS}\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL)

_DOWNGRADED = re.compile(r"^\s*\[(?:Tool Call:|Tool Result\b|Historical context:)", re.IGNORECASE)

_THINK_NAMES = r"(?:think|thinking|thought|antthinking)"
_THINKING = re.compile(rf"<({_THINK_NAMES})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_THINKING_CLOSE = re.compile(rf"</{_THINK_NAMES}\s*>", re.IGNORECASE)
_THINKING_OPEN = re.compile(rf"<{_THINK_NAMES}\b[^>]*>", re.IGNORECASE)
_FINAL = re.compile(r"</?final\s*>", re.IGNORECASE)
_SYSTEM_MESSAGE = re.compile(r"^\s*\[System Message\]", re.IGNORECASE)


def strip_garbled_tool_xml(text: str) -> str:
    """Step 1: remove ``<tool_call>``-style XML (DeepSeek, GLM, Minimax) printed as text."""
    if "<" not in text:
        return text
    text = _TOOL_BLOCK.sub("", text)
    text = _PARAMETER.sub("", text)
    text = _TOOL_UNCLOSED.sub("", text)
    text = _TOOL_TAG.sub("", text)
    return "" if not text.strip() else text


def _brace_balance(line: str) -> int:
    return line.count("{") + line.count("[") - line.count("}") - line.count("]")


def strip_downgraded_tool_calls(text: str) -> str:
    """Step 2: drop ``[Tool Call: ...]``/``[Tool Result ...]`` lines and their JSON arguments."""
    if "[" not in text:
        return text
    kept: list[str] = []
    depth = 0  # open JSON brackets of the arguments being skipped
    expect_json = False  # the line after a marker may start its arguments
    for line in text.split("\n"):
        stripped = line.strip()
        if depth > 0:
            depth += _brace_balance(stripped)
            continue
        if _DOWNGRADED.match(line):
            rest = stripped[stripped.find("]") + 1 :] if "]" in stripped else ""
            # The marker's own brackets balance; only what follows it can open JSON.
            depth = max(_brace_balance(rest), 0)
            expect_json = depth == 0
            continue
        if expect_json and (
            stripped.startswith(("{", "["))
            or stripped.lower().startswith(("arguments:", "args:", "input:"))
        ):
            depth = max(_brace_balance(stripped), 0)
            continue
        expect_json = False
        kept.append(line)
    return "\n".join(kept)


def strip_thinking_tags(text: str) -> str:
    """Step 3: remove reasoning blocks; case-insensitive, non-greedy.

    A lone closing tag (the opener was in the prompt) drops what precedes it; an opener never
    closed (the answer was cut) drops what follows it.
    """
    if "<" not in text:
        return text
    text = _THINKING.sub("", text)
    closing = list(_THINKING_CLOSE.finditer(text))
    if closing:
        text = text[closing[-1].end() :]
    opening = _THINKING_OPEN.search(text)
    if opening:
        text = text[: opening.start()]
    return text


def strip_final_tags(text: str) -> str:
    """Step 4: remove ``<final>``/``</final>`` and keep what they wrap."""
    return _FINAL.sub("", text)


def strip_echoed_system_messages(text: str) -> str:
    """Step 5: drop ``[System Message]`` blocks: from the marker line to the next empty line."""
    if "[" not in text:
        return text
    kept: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if skipping:
            if not line.strip():
                skipping = False
            continue
        if _SYSTEM_MESSAGE.match(line):
            skipping = True
            continue
        kept.append(line)
    return "\n".join(kept)


def collapse_duplicate_paragraphs(text: str) -> str:
    """Step 6: a paragraph identical to the one before it (model stutter) is dropped."""
    blocks = text.split("\n\n")
    kept: list[str] = []
    for block in blocks:
        if kept and block.strip() and block.strip() == kept[-1].strip():
            continue
        kept.append(block)
    return "\n\n".join(kept)


def strip_leading_blank_lines(text: str) -> str:
    """Step 7: remove whitespace-only lines at the start; the first real line keeps its indent."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


STEPS: tuple[Callable[[str], str], ...] = (
    strip_garbled_tool_xml,
    strip_downgraded_tool_calls,
    strip_thinking_tags,
    strip_final_tags,
    strip_echoed_system_messages,
    collapse_duplicate_paragraphs,
    strip_leading_blank_lines,
)


def sanitize_output(text: str) -> str:
    """The seven steps in order, then trailing whitespace trimmed."""
    for step in STEPS:
        text = step(text)
    return text.rstrip()
