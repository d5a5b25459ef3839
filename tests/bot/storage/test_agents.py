"""SqlAgentStore's split of an agent between columns and the JSON ``settings`` column, on SQLite
and Postgres (tests/bot/agents/test_stored_agents.py covers the CRUD round trip, created_at and
the rows that no longer validate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Row, select, update
from structlog.testing import capture_logs

from bot.config import AgentConfig
from bot.config.agents import AgentDefaults, resolve_guardrails
from bot.storage import Database, SqlAgentStore
from bot.storage.models import AgentRow


async def row_of(db: Database, agent_id: str) -> Row[Any]:
    query = select(AgentRow).where(AgentRow.id == agent_id)
    row = await db.run_read(lambda conn: conn.execute(query).first())
    assert row is not None
    return row


async def test_nested_and_list_settings_round_trip(db: Database) -> None:
    store = SqlAgentStore(db)
    agent = AgentConfig.model_validate(
        {
            "id": "a",
            "max_file_bytes": "512KiB",
            "agent_type": "predefined",
            "owner_ids": ["u1", "u2"],
            "mcp_servers": [],
            "disabled_tools": ["web_fetch"],
            "context_pruning": {"mode": "off"},
            "compaction": {"keep_last": 2, "memory_flush": {"enabled": False}},
            "evolution_guardrails": {"locked_params": ["soul"], "min_data_points": 5},
        }
    )
    await store.upsert(agent)
    stored = await store.get("a")
    assert stored is not None and stored.agent == agent
    assert stored.agent.max_file_bytes == 512 * 1024
    assert stored.agent.mcp_servers == []  # an empty list is not "unset"
    row = await row_of(db, "a")
    assert row.model is None and row.max_iterations is None
    assert "provider" not in row.settings and "id" not in row.settings
    assert row.settings["disabled_tools"] == ["web_fetch"]
    assert row.settings["compaction"]["memory_flush"]["enabled"] is False


async def test_unset_fields_are_not_stored(db: Database) -> None:
    store = SqlAgentStore(db)
    await store.upsert(AgentConfig(id="a", history_limit=3, extra_context="x"))
    await store.upsert(AgentConfig(id="a", history_limit=4))
    row = await row_of(db, "a")
    assert row.settings == {"history_limit": 4}  # extra_context is gone, not kept
    stored = await store.get("a")
    assert stored is not None and stored.agent.extra_context is None


async def test_columns_win_over_a_settings_key_of_the_same_name(db: Database) -> None:
    store = SqlAgentStore(db)
    await store.upsert(AgentConfig(id="a", model="column-model", workspace=Path("/srv/a")))
    statement = (
        update(AgentRow)
        .where(AgentRow.id == "a")
        .values(settings={"model": "settings-model", "id": "other", "history_limit": 2})
    )
    await db.run_write(lambda conn: conn.execute(statement).close())
    stored = await store.get("a")
    assert stored is not None
    assert stored.agent.id == "a" and stored.agent.model == "column-model"
    assert stored.agent.workspace == Path("/srv/a") and stored.agent.history_limit == 2


async def test_get_of_an_unknown_agent(db: Database) -> None:
    store = SqlAgentStore(db)
    assert await store.get("nobody") is None
    assert await store.list() == []


async def test_writes_are_logged(db: Database) -> None:
    store = SqlAgentStore(db)
    with capture_logs() as logs:
        await store.upsert(AgentConfig(id="a"))
        await store.delete("a")
        await store.delete("a")
    assert [(e["event"], e["agent_id"]) for e in logs] == [
        ("agent.stored", "a"),
        ("agent.deleted", "a"),
    ]


async def test_a_stored_partial_section_still_overrides_key_by_key(db: Database) -> None:
    store = SqlAgentStore(db)
    defaults = AgentDefaults.model_validate({"evolution_guardrails": {"locked_params": ["soul"]}})
    agent = AgentConfig.model_validate({"id": "a", "evolution_guardrails": {"min_data_points": 5}})
    assert resolve_guardrails(defaults, agent).locked_params == ["soul"]
    await store.upsert(agent)
    stored = await store.get("a")
    assert stored is not None
    assert resolve_guardrails(defaults, stored.agent).locked_params == ["soul"]
