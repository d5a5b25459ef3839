"""Evolution suggestions for review (:mod:`bot.evolution`): list, approve, reject.

The service does the work (applying an approved change, recording who and when); the dashboard
only shows it and passes the admin's decision on. An approval is recorded as decided by
``admin`` (the dashboard has one token, not named users) plus how the admin signed in.
"""

from __future__ import annotations

from typing import Any

from bot.app import Loopgate
from bot.evolution.records import Suggestion, SuggestionStatus, describe_change
from bot.evolution.service import EvolutionService


def service(loopgate: Loopgate) -> EvolutionService:
    return loopgate.evolution


def parse_status(value: str | None) -> SuggestionStatus | None:
    """``?status=`` (empty or ``all``: every status); raises ValueError for an unknown one."""
    if not value or value == "all":
        return None
    return SuggestionStatus(value)


def as_dict(suggestion: Suggestion) -> dict[str, Any]:
    def iso(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": suggestion.id,
        "agent_id": suggestion.agent_id,
        "rule": suggestion.rule,
        "status": suggestion.status.value,
        "summary": suggestion.summary,
        "change": suggestion.change,
        "change_text": describe_change(suggestion.change),
        "evidence": suggestion.evidence,
        "created_at": iso(suggestion.created_at),
        "decided_by": suggestion.decided_by,
        "decided_at": iso(suggestion.decided_at),
        "applied_at": iso(suggestion.applied_at),
        "baseline": suggestion.baseline,
        "outcome": suggestion.outcome,
        "reason": suggestion.reason,
        "history": list(suggestion.history),
    }


async def list_suggestions(
    loopgate: Loopgate, *, status: SuggestionStatus | None = None, agent_id: str | None = None
) -> list[dict[str, Any]]:
    return [as_dict(s) for s in await service(loopgate).list(status=status, agent_id=agent_id)]


async def get_suggestion(loopgate: Loopgate, suggestion_id: str) -> dict[str, Any] | None:
    found = await service(loopgate).get(suggestion_id)
    return as_dict(found) if found is not None else None


async def decide(
    loopgate: Loopgate, suggestion_id: str, *, approve: bool, by: str, reason: str = ""
) -> dict[str, Any] | None:
    """Approve (the service applies it) or reject; None for an unknown suggestion. Raises
    ValueError when it can't be decided (no longer pending, a locked parameter...)."""
    evolution = service(loopgate)
    if await evolution.get(suggestion_id) is None:
        return None
    if approve:
        return as_dict(await evolution.approve(suggestion_id, by=by))
    return as_dict(await evolution.reject(suggestion_id, by=by, reason=reason))


async def metrics(loopgate: Loopgate, agent_id: str | None = None) -> list[dict[str, Any]]:
    """Each agent's metrics over the evolution window ending now (what the rules read)."""
    return [m.as_dict() for m in await service(loopgate).metrics(agent_id)]
