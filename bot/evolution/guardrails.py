"""The guardrails as checks: which names a change touches, whether they are locked, and how
far a numeric parameter may move in one cycle.

Which guardrails hold for an agent is configuration
(:func:`bot.config.agents.resolve_guardrails`).
"""

from __future__ import annotations

import math
from typing import Any

from bot.config.evolution import EvolutionGuardrails
from bot.evolution.records import ChangeKind

TUNABLE_PARAMS = ("max_iterations", "max_tool_calls", "history_limit")
"""Numeric agent keys a suggestion may change (each an int field of AgentConfig)."""

PROMPT_TARGET = "system_prompt"
TOOL_POLICY_TARGET = "disabled_tools"


def touched(change: dict[str, Any]) -> set[str]:
    """Every name ``locked_params`` may use to lock this change."""
    kind = change.get("kind")
    if kind == ChangeKind.PARAM:
        return {str(change["param"])}
    if kind == ChangeKind.PROMPT:
        return {str(change.get("target", PROMPT_TARGET)), "prompt"}
    if kind == ChangeKind.TOOL_POLICY:
        return {TOOL_POLICY_TARGET, "tools", *(f"tool:{t}" for t in change["disable"])}
    return set()


def locked_by(change: dict[str, Any], guardrails: EvolutionGuardrails) -> str | None:
    """The locked name the change would touch, or None."""
    hit = sorted(touched(change) & set(guardrails.locked_params))
    return hit[0] if hit else None


def max_step(current: int, guardrails: EvolutionGuardrails) -> int:
    """The largest change of an integer parameter one suggestion may make."""
    return math.floor(abs(current) * guardrails.max_delta_per_cycle + 1e-9)


def capped_target(current: int, desired: int, guardrails: EvolutionGuardrails) -> int:
    """``desired``, moved no further from ``current`` than ``max_delta_per_cycle`` allows
    (relative to ``current``); ``current`` itself when not even one step is allowed."""
    step = min(abs(desired - current), max_step(current, guardrails))
    return current + step if desired >= current else current - step


def within_cap(change: dict[str, Any], guardrails: EvolutionGuardrails) -> bool:
    if change.get("kind") != ChangeKind.PARAM:
        return True
    current, target = int(change["from"]), int(change["to"])
    return abs(target - current) <= max_step(current, guardrails)
