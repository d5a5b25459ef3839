"""Agents as ``loopgate agents`` shows and edits them, for the dashboard.

Only the database copy of an agent is edited (``config.yaml`` stays the operator's file): a
stored agent is merged over the config entry of the same id, field by field. Saving goes
through :meth:`bot.agents.router.AgentRouter.save`, which checks the providers and drops the cached
loop, so the next message of this process already uses the change.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bot.agents.router import AgentRouter, UnknownAgent
from bot.app import Loopgate
from bot.config import AgentConfig
from bot.config.agents import SETTABLE
from bot.errors import BotError
from bot.storage import SqlAgentStore, StoredAgent

INT_FIELDS = frozenset({"max_iterations"})


class AgentEditError(BotError, ValueError):
    """A change that can't be stored; ``problems`` maps a field to what is wrong with it."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{k}: {v}" for k, v in problems.items()))


def _router(loopgate: Loopgate) -> AgentRouter:
    return loopgate.gateway.router


def _store(loopgate: Loopgate) -> SqlAgentStore:
    return SqlAgentStore(loopgate.db)


async def list_agents(loopgate: Loopgate) -> list[dict[str, Any]]:
    """Every agent a message can reach: configured, stored, or both."""
    stored = {s.agent.id: s for s in await _store(loopgate).list()}
    router = _router(loopgate)
    ids = list(dict.fromkeys([*router.agent_ids, *stored]))
    return [_describe(loopgate, agent_id, stored.get(agent_id)) for agent_id in ids]


async def get_agent(loopgate: Loopgate, agent_id: str) -> dict[str, Any] | None:
    stored = await _store(loopgate).get(agent_id)
    if stored is None and agent_id not in _router(loopgate).agent_ids:
        return None
    return _describe(loopgate, agent_id, stored)


def _describe(loopgate: Loopgate, agent_id: str, stored: StoredAgent | None) -> dict[str, Any]:
    config = loopgate.config
    configured = next((a for a in config.agents.list if a.id == agent_id), None)
    sources = [name for name, there in (("config", configured), ("db", stored)) if there]
    try:
        settings = _router(loopgate).settings(agent_id, stored.agent if stored else None)
        resolved: dict[str, Any] = {
            "provider": settings.provider,
            "model": settings.model,
            "max_iterations": settings.max_iterations,
        }
    except (UnknownAgent, KeyError, ValueError) as exc:  # e.g. a provider removed from config
        resolved = {"error": str(exc)}
    return {
        "id": agent_id,
        "default": agent_id == config.agents.default,
        "source": "+".join(sources) or "defaults",
        "resolved": resolved,
        "stored": stored.agent.model_dump(mode="json", exclude_none=True) if stored else None,
        "configured": configured.model_dump(mode="json", exclude_unset=True)
        if configured
        else None,
        "updated_at": stored.updated_at.isoformat() if stored else None,
    }


def parse_changes(raw: dict[str, Any]) -> dict[str, Any]:
    """The settable fields in ``raw`` (a form or a JSON body); ``""``/null clears a field.

    Raises :class:`AgentEditError` for unknown fields or a non-integer number."""
    unknown = sorted(set(raw) - set(SETTABLE))
    if unknown:
        settable = ", ".join(SETTABLE)
        raise AgentEditError({k: f"not editable here (editable: {settable})" for k in unknown})
    changes: dict[str, Any] = {}
    for name, value in raw.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            changes[name] = None
        elif name in INT_FIELDS and isinstance(value, str):
            try:
                changes[name] = int(value)
            except ValueError:
                raise AgentEditError({name: "a whole number"}) from None
        else:
            changes[name] = value
    return changes


async def save_agent(loopgate: Loopgate, agent_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Store the agent with ``changes`` over its stored fields (as ``loopgate agents set``);
    returns it as :func:`get_agent` does."""
    existing = await _store(loopgate).get(agent_id)
    data = existing.agent.model_dump(exclude_unset=True) if existing else {}
    try:
        agent = AgentConfig.model_validate({**data, **changes, "id": agent_id})
    except ValidationError as exc:
        raise AgentEditError(
            {".".join(str(p) for p in e["loc"]) or "agent": e["msg"] for e in exc.errors()}
        ) from None
    try:
        await _router(loopgate).save(agent)
    except ValueError as exc:  # an unknown provider
        raise AgentEditError({"provider": str(exc)}) from None
    described = await get_agent(loopgate, agent_id)
    assert described is not None
    return described


async def delete_agent(loopgate: Loopgate, agent_id: str) -> bool:
    """Delete the stored copy; the config definition (if any) applies again."""
    return await _router(loopgate).remove(agent_id)


def providers(loopgate: Loopgate) -> list[str]:
    return sorted(loopgate.config.providers.all())
