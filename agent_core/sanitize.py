"""Cleaning the model's final answer before anyone sees it.

First slice of the spec's seven-step pipeline: reasoning tags and final-wrapper tags are removed
and whitespace trimmed. The remaining steps are tracked in the agent-core issue.
"""

from __future__ import annotations

import re

_THINKING = re.compile(
    r"<(think|thinking|thought|antthinking)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_FINAL = re.compile(r"</?final\s*>", re.IGNORECASE)


def strip_thinking_tags(text: str) -> str:
    return _THINKING.sub("", text)


def strip_final_tags(text: str) -> str:
    return _FINAL.sub("", text)


def sanitize_output(text: str) -> str:
    text = strip_thinking_tags(text)
    text = strip_final_tags(text)
    return text.strip()
