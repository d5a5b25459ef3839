"""Prompt-injection detection on user messages (spec section 4).

A detector, not a filter: by default (``warn``) it only logs ``security.injection_detected``
with the names of the patterns that matched. ``block`` refuses the message before any model
call; ``off`` skips scanning entirely.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)

BLOCKED_REPLY = (
    "I can't process this message: it looks like an attempt to override my instructions. "
    "Please rephrase your request."
)


class GuardMode(enum.StrEnum):
    OFF = "off"  # no scanning at all
    LOG = "log"  # log at info level, continue
    WARN = "warn"  # log at warning level, continue (default)
    BLOCK = "block"  # log at warning level and refuse the message


PATTERNS: dict[str, re.Pattern[str]] = {
    "ignore_instructions": re.compile(
        r"\b(ignore|disregard|forget|skip)\b[^\n.]{0,40}?\b(previous|prior|above|earlier|all|your|the)"
        r"\b[^\n.]{0,20}?\b(instructions?|prompts?|rules|directions|guidelines|context)\b",
        re.IGNORECASE,
    ),
    "role_override": re.compile(
        r"\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\s+(are|will|must)\b|"
        r"\bact\s+as\s+(if\s+you\s+were\s+)?(a|an|the)\s+(different|new|unrestricted|jailbroken)\b|"
        r"\bpretend\s+(to\s+be|you\s+are)\b",
        re.IGNORECASE,
    ),
    "system_tags": re.compile(
        r"<\|?\s*(im_start|im_end|system|endoftext)\s*\|?>|\[/?\s*(SYSTEM|INST)\s*\]|"
        r"<<\s*SYS\s*>>|</?\s*system\s*>|^\s*system\s*:",
        re.IGNORECASE | re.MULTILINE,
    ),
    "instruction_injection": re.compile(
        r"\b(new|updated|real|actual|secret)\s+(instructions?|directives?|system\s+prompt)\s*:|"
        r"^\s*override\s*:|\boverride\s+(your|the|all)\s+(instructions?|rules|settings)\b",
        re.IGNORECASE | re.MULTILINE,
    ),
    "null_bytes": re.compile(r"\x00"),
    "delimiter_escape": re.compile(
        r"\bend\s+of\s+(the\s+)?(system|instructions?|prompt|context)\b|"
        r"</\s*(instructions?|prompt|context|user_input|user)\s*>|^\s*(-{3,}|={3,}|#{3,})\s*"
        r"(end|begin)\b",
        re.IGNORECASE | re.MULTILINE,
    ),
}


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    patterns: tuple[str, ...]
    blocked: bool

    @property
    def detected(self) -> bool:
        return bool(self.patterns)


def scan(text: str) -> tuple[str, ...]:
    """Names of the patterns ``text`` matches, in the spec's order."""
    return tuple(name for name, pattern in PATTERNS.items() if pattern.search(text))


def check(text: str, mode: GuardMode | str, **fields: object) -> GuardVerdict:
    """Scan ``text`` under ``mode`` and log a detection; ``fields`` are added to the log event."""
    mode = GuardMode(mode)
    if mode is GuardMode.OFF:
        return GuardVerdict((), blocked=False)
    found = scan(text)
    if not found:
        return GuardVerdict((), blocked=False)
    emit = log.info if mode is GuardMode.LOG else log.warning
    blocked = mode is GuardMode.BLOCK
    emit(
        "security.injection_detected",
        patterns=list(found),
        action=str(mode),
        blocked=blocked,
        **fields,
    )
    return GuardVerdict(found, blocked=blocked)


TRUNCATION_NOTE = "\n\n[Note: the message was {n} characters long and was truncated to {limit}.]"


def bound_input(text: str, limit: int) -> str:
    """A user message cut at ``limit`` characters, telling the model it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_NOTE.format(n=len(text), limit=limit)
