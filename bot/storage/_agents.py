"""Agents stored in the database (the ``agents`` table), edited with ``loopgate agents``.

A stored agent uses the same shape as an ``agents.list`` entry of ``config.yaml``
(:class:`~bot.config.AgentConfig`): unset fields are NULL and fall back to the config entry of the
same id, then to ``agents.defaults``. Keys without a column of their own (``max_tool_calls``,
keys added later) live in the JSON ``settings`` column, so a new agent key needs no migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from pydantic import ValidationError
from sqlalchemy import Row, delete, select

from bot.config import AgentConfig
from bot.storage._db import Database
from bot.storage._sql import clean_optional, table_of, upsert_insert
from bot.storage.models import AgentRow, utcnow

log = structlog.get_logger(__name__)

# AgentConfig fields stored in a column of their own; every other field goes to ``settings``.
_COLUMNS = (
    "provider",
    "model",
    "system_prompt",
    "max_iterations",
    "context_window",
    "workspace",
    "fallback_provider",
    "fallback_model",
)


@dataclass(frozen=True, slots=True)
class StoredAgent:
    agent: AgentConfig
    created_at: datetime
    updated_at: datetime


class SqlAgentStore:
    """CRUD on the ``agents`` table. Rows that no longer validate (edited by hand, or written by
    a newer version) are skipped with an ``agent.invalid_row`` warning instead of failing."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, agent_id: str) -> StoredAgent | None:
        query = select(AgentRow).where(AgentRow.id == agent_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).first())
        return None if row is None else _from_row(row)

    async def list(self) -> list[StoredAgent]:
        """Every stored agent, ordered by id."""
        query = select(AgentRow).order_by(AgentRow.id)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [agent for agent in map(_from_row, rows) if agent is not None]

    async def upsert(self, agent: AgentConfig) -> None:
        """Insert or replace the agent (every field, NULL where unset); keeps ``created_at``."""
        now = utcnow()
        values = _to_values(agent)
        stmt = upsert_insert(self._db, table_of(AgentRow)).values(
            id=agent.id, created_at=now, updated_at=now, **values
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[AgentRow.id],
            set_={**{k: getattr(stmt.excluded, k) for k in values}, "updated_at": now},
        )
        await self._db.run_statement(lambda conn: conn.execute(stmt).close())
        log.info("agent.stored", agent_id=agent.id)

    async def delete(self, agent_id: str) -> bool:
        """Remove the agent; False when it was not stored."""
        statement = delete(AgentRow).where(AgentRow.id == agent_id)
        removed = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        if removed:
            log.info("agent.deleted", agent_id=agent_id)
        return removed > 0


def _to_values(agent: AgentConfig) -> dict[str, Any]:
    full = agent.model_dump(mode="json", exclude={"id"})
    values: dict[str, Any] = {name: full[name] for name in _COLUMNS}
    values["system_prompt"] = clean_optional(values["system_prompt"])
    # Only what the agent sets, down to the keys of a section: a section such as
    # evolution_guardrails overrides agents.defaults key by key, so a key stored with its
    # default value would override the operator's default after a round trip.
    partial = agent.model_dump(mode="json", exclude={"id", *_COLUMNS}, exclude_unset=True)
    values["settings"] = {k: v for k, v in partial.items() if v is not None}
    return values


def _from_row(row: Row[Any]) -> StoredAgent | None:
    known = set(AgentConfig.model_fields)
    extra = dict(row.settings or {})
    unknown = sorted(set(extra) - known)
    if unknown:
        log.warning("agent.unknown_settings", agent_id=row.id, keys=unknown)
    data: dict[str, Any] = {k: v for k, v in extra.items() if k in known and k != "id"}
    data.update({name: getattr(row, name) for name in _COLUMNS})
    try:
        agent = AgentConfig.model_validate({**data, "id": row.id})
    except ValidationError as exc:
        log.warning("agent.invalid_row", agent_id=row.id, error=str(exc))
        return None
    return StoredAgent(agent, row.created_at, row.updated_at)
