"""Applying a suggestion's change to the stored agent, and undoing it.

Changes go to the ``agents`` table exactly as ``loopgate agents set`` writes it (a stored agent
is merged over its ``config.yaml`` entry field by field), so an approved change survives
restarts and ``loopgate agents delete`` still brings back the config.yaml definition. Before the
change, the stored value of the one field it touches is kept (``previous``); a rollback puts
that value back (or unsets it) without touching fields edited since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agents.router import merge_agent
from bot.agents.settings import agent_settings
from bot.config import Config
from bot.config.agents import AgentConfig, resolve_guardrails
from bot.config.evolution import EvolutionGuardrails
from bot.evolution.guardrails import (
    PROMPT_TARGET,
    TOOL_POLICY_TARGET,
    TUNABLE_PARAMS,
)
from bot.evolution.records import ChangeKind
from bot.storage import SqlAgentStore


@dataclass(frozen=True, slots=True)
class AgentView:
    """What the rules and the guardrails need to know of one agent, as it resolves now."""

    agent_id: str
    known: bool  # configured, stored or the default agent
    definition: AgentConfig | None  # config.yaml entry merged with the stored row
    stored: AgentConfig | None
    guardrails: EvolutionGuardrails
    params: dict[str, int]  # resolved TUNABLE_PARAMS
    system_prompt: str
    disabled_tools: tuple[str, ...]
    workspace: str  # the agent's workspace base, resolved


async def view_agent(config: Config, agents: SqlAgentStore, agent_id: str) -> AgentView:
    row = await agents.get(agent_id)
    stored = row.agent if row is not None else None
    configured = next((a for a in config.agents.list if a.id == agent_id), None)
    definition = merge_agent(configured, stored)
    settings = agent_settings(config, agent_id, definition)
    known = definition is not None or agent_id in {"main", config.agents.default}
    return AgentView(
        agent_id=agent_id,
        known=known,
        definition=definition,
        stored=stored,
        guardrails=resolve_guardrails(config.agents.defaults, definition),
        params={name: int(getattr(settings, name)) for name in TUNABLE_PARAMS},
        system_prompt=settings.system_prompt,
        disabled_tools=tuple((definition and definition.disabled_tools) or ()),
        workspace=str(settings.workspace.resolve()),
    )


def new_value(view: AgentView, change: dict[str, Any]) -> tuple[str, Any]:
    """The stored field the change sets and its new value."""
    kind = change["kind"]
    if kind == ChangeKind.PARAM:
        param = change["param"]
        if param not in TUNABLE_PARAMS:
            raise ValueError(f"{param!r} is not a parameter evolution may change")
        return param, int(change["to"])
    if kind == ChangeKind.PROMPT:
        text = str(change["append"]).strip()
        current = view.system_prompt.rstrip()
        return PROMPT_TARGET, f"{current}\n\n{text}" if current else text
    if kind == ChangeKind.TOOL_POLICY:
        return TOOL_POLICY_TARGET, sorted({*view.disabled_tools, *change["disable"]})
    raise ValueError(f"unknown change kind {kind!r}")


async def apply_change(
    agents: SqlAgentStore, view: AgentView, change: dict[str, Any]
) -> dict[str, Any]:
    """Store the change; returns what :func:`revert_change` needs to undo it."""
    field, value = new_value(view, change)
    stored = view.stored
    data = stored.model_dump(exclude_unset=True) if stored else {}
    previous = {
        "field": field,
        "row_existed": stored is not None,
        "was_set": field in data and data[field] is not None,
        "value": data.get(field),
        "applied_value": value,
    }
    data[field] = value
    await agents.upsert(AgentConfig.model_validate({**data, "id": view.agent_id}))
    return previous


async def revert_change(agents: SqlAgentStore, agent_id: str, previous: dict[str, Any]) -> None:
    """Put back the stored value the change replaced; a row the change created is deleted
    when nothing else was stored in it since."""
    field = previous["field"]
    row = await agents.get(agent_id)
    data = row.agent.model_dump(exclude_unset=True) if row else {}
    data.pop("id", None)
    if previous["was_set"]:
        data[field] = previous["value"]
    else:
        data.pop(field, None)
    if not previous["row_existed"] and not any(v is not None for v in data.values()):
        await agents.delete(agent_id)
        return
    await agents.upsert(AgentConfig.model_validate({**data, "id": agent_id}))
