"""Context pruning (spec section 6): shrink old tool results before they overflow the window.

Two passes over the messages of a request, by token ratio against the context window:

- soft trim at ``>= soft_trim_ratio`` (0.3): a tool result longer than 6,000 characters keeps
  its first and last 3,000 with ``...`` between;
- hard clear at ``>= hard_clear_ratio`` (0.5): tool results originally ``>= 50,000`` characters
  become :data:`CLEARED`, oldest first, stopping as soon as the ratio is under the threshold.

Never touched: system messages, the first user message (and anything before it), and
everything from the ``keep_last_assistants``-th last assistant message on. The result goes
through ``sanitize_history`` so pairing stays valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from agent_core.history import sanitize_history
from agent_core.messages import Message
from agent_core.settings import PruningSettings

CLEARED = "[Old tool result content cleared]"
SOFT_TRIM_JOINER = "\n...\n"


@dataclass(frozen=True, slots=True)
class PruneResult:
    messages: list[Message]
    soft_trimmed: int = 0
    hard_cleared: int = 0
    ratio_before: float = 0.0
    ratio_after: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.soft_trimmed or self.hard_cleared)


def prunable_indices(messages: Sequence[Message], keep_last_assistants: int) -> list[int]:
    """Indices of tool results outside the protected zone, oldest first."""
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    cutoff = len(messages)
    if keep_last_assistants > 0:
        seen = 0
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].role == "assistant":
                seen += 1
                if seen == keep_last_assistants:
                    cutoff = i
                    break
        else:
            cutoff = 0  # fewer assistants than protected: everything is recent
    return [i for i in range(first_user + 1, cutoff) if messages[i].role == "tool"]


def could_prune(messages: Sequence[Message], settings: PruningSettings) -> bool:
    """Whether :func:`prune_context` could change ``messages`` at any ratio: some tool result
    outside the protected zone is long enough to be soft-trimmed or hard-cleared. When none is,
    the passes' thresholds decide nothing, so their count need not be taken."""
    return settings.enabled and any(
        len(content := messages[i].content) > settings.soft_trim_max_chars
        or _clearable(len(content), content, settings)
        for i in prunable_indices(messages, settings.keep_last_assistants)
    )


def _clearable(original_chars: int, content: str, settings: PruningSettings) -> bool:
    """Whether the hard clear may replace a result that was ``original_chars`` long before any
    soft trim (shared by :func:`prune_context` and :func:`could_prune`)."""
    return original_chars >= settings.min_prunable_tool_chars and content != CLEARED


def soft_trim(content: str, max_chars: int, keep_chars: int) -> str:
    if len(content) <= max_chars:
        return content
    return content[:keep_chars] + SOFT_TRIM_JOINER + content[-keep_chars:]


def prune_context(
    messages: Sequence[Message],
    *,
    budget: int,
    count: Callable[[Sequence[Message]], int],
    settings: PruningSettings,
) -> PruneResult:
    """Apply the two passes; ``budget`` is the context window in tokens."""
    out = list(messages)
    if not settings.enabled or budget <= 0:
        return PruneResult(out)
    ratio = before = count(out) / budget
    if ratio < settings.soft_trim_ratio:
        return PruneResult(out, ratio_before=before, ratio_after=ratio)
    candidates = prunable_indices(out, settings.keep_last_assistants)
    original = {i: len(out[i].content) for i in candidates}
    trimmed = cleared = 0
    for i in candidates:
        new = soft_trim(out[i].content, settings.soft_trim_max_chars, settings.soft_trim_keep_chars)
        if new != out[i].content:
            out[i] = replace(out[i], content=new)
            trimmed += 1
    ratio = count(out) / budget
    if ratio >= settings.hard_clear_ratio:
        for i in candidates:
            if not _clearable(original[i], out[i].content, settings):
                continue
            out[i] = replace(out[i], content=CLEARED)
            cleared += 1
            ratio = count(out) / budget
            if ratio < settings.hard_clear_ratio:
                break
    if trimmed or cleared:
        out = sanitize_history(out)
    return PruneResult(out, trimmed, cleared, before, ratio)
