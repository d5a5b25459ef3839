"""Agents stored in the database: SqlAgentStore, the router resolving them (TTL, merge over
config.yaml, invalidation), and the unknown-agent reply.
``loopgate agents`` is tested in tests/bot/cli/test_agents.py.

Store and router tests run on SQLite and, when LOOPGATE_TEST_POSTGRES_URL is set, on Postgres.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, inspect, select, update
from structlog.testing import capture_logs

from agent_core import EventBus, MemoryStore, RunStatus
from bot.agents.router import AgentRouter, UnknownAgent
from bot.app import Loopgate
from bot.config import AgentConfig, parse_config
from bot.storage import Database, SqlAgentStore, StoredAgent, open_database
from bot.storage._db import alembic_config
from bot.storage.models import AgentRow
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, text
from tests.storage_support import Backend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CONFIG: dict[str, Any] = {
    "providers": {"ollama": {"base_url": "http://127.0.0.1:9/v1", "model": "llama-x"}},
    "agents": {
        "defaults": {"max_iterations": 7, "context_window": 50_000},
        "list": [{"id": "support", "provider": "ollama", "system_prompt": "be kind"}],
    },
}


def make_router(
    tmp_path: Path, agent_store: Any, clock: Clock | None = None, ttl: float = 60
) -> AgentRouter:
    data = {**CONFIG, "agents": {**CONFIG["agents"]}}
    data["agents"]["defaults"] = {**data["agents"]["defaults"], "workspace": str(tmp_path)}
    memory = MemoryStore()
    return AgentRouter(
        parse_config(data, {}),
        store=memory,
        traces=memory,
        events=EventBus(),
        clock=clock or Clock(),
        ttl=ttl,
        agent_store=agent_store,
    )


# --- the store ----------------------------------------------------------------------------


class TestStore:
    async def test_round_trip_every_field(self, db: Database) -> None:
        store = SqlAgentStore(db)
        agent = AgentConfig(
            id="helper",
            provider="ollama",
            model="m",
            max_iterations=5,
            context_window=4096,
            workspace=Path("/srv/ws"),
            system_prompt="héllo\x00 🌍",
            fallback_provider="openai",
            fallback_model="gpt-x",
            max_tool_calls=9,
        )
        await store.upsert(agent)
        stored = await store.get("helper")
        assert stored is not None
        expected = agent.model_copy(update={"system_prompt": "héllo\ufffd 🌍"})
        assert stored.agent == expected
        assert stored.created_at == stored.updated_at and stored.created_at.tzinfo is not None
        settings = await db.run_read(
            lambda conn: conn.execute(
                select(AgentRow.settings).where(AgentRow.id == "helper")
            ).scalar_one()
        )
        assert settings == {"max_tool_calls": 9}  # no column of its own

    async def test_upsert_replaces_fields_and_keeps_created_at(self, db: Database) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="a", model="one", system_prompt="p"))
        first = await store.get("a")
        await store.upsert(AgentConfig(id="a", model="two"))
        second = await store.get("a")
        assert first is not None and second is not None
        assert second.agent.model == "two" and second.agent.system_prompt is None
        assert second.created_at == first.created_at
        assert second.updated_at >= first.updated_at

    async def test_list_and_delete(self, db: Database) -> None:
        store = SqlAgentStore(db)
        for agent_id in ("b", "a", "c"):
            await store.upsert(AgentConfig(id=agent_id))
        assert [s.agent.id for s in await store.list()] == ["a", "b", "c"]
        assert await store.delete("b") is True
        assert await store.delete("b") is False
        assert await store.get("b") is None
        assert [s.agent.id for s in await store.list()] == ["a", "c"]

    async def test_bad_rows_are_skipped_with_a_warning(self, db: Database) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="good", max_tool_calls=3))
        await store.upsert(AgentConfig(id="bad"))

        def corrupt(conn: Connection) -> None:
            conn.execute(
                update(AgentRow)
                .where(AgentRow.id == "good")
                .values(settings={"max_tool_calls": 3, "from_the_future": 1})
            )
            conn.execute(update(AgentRow).where(AgentRow.id == "bad").values(max_iterations=0))

        await db.run_write(corrupt)
        with capture_logs() as logs:
            good = await store.get("good")
            assert await store.get("bad") is None
            assert [s.agent.id for s in await store.list()] == ["good"]
        assert good is not None and good.agent.max_tool_calls == 3
        events = {(e["event"], e["agent_id"]) for e in logs}
        assert ("agent.unknown_settings", "good") in events
        assert ("agent.invalid_row", "bad") in events


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


async def test_migration_downgrades_and_upgrades_again(backend: Backend) -> None:
    async with await backend.open() as db:
        await SqlAgentStore(db).upsert(AgentConfig(id="a"))
        assert "agents" in await db.run_read(_tables)

        def downgrade(conn: Connection) -> set[str]:
            # Down to 0001: through 0003 (memory index) and 0002 (agents), whatever the head.
            command.downgrade(alembic_config(conn), "0001")
            return _tables(conn)

        tables = await db.run_write(downgrade)
        assert "agents" not in tables and "sessions" in tables
        assert not {t for t in tables if t.startswith("memory_")}
    async with await backend.open() as db:  # migrated to head again on open
        assert await SqlAgentStore(db).list() == []


# --- the router ---------------------------------------------------------------------------


class TestRouter:
    async def test_stored_agent_resolves_with_defaults(self, db: Database, tmp_path: Path) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="helper", provider="ollama", max_tool_calls=4))
        router = make_router(tmp_path, store)
        loop = await router.resolve("helper")
        s = loop.settings
        assert (s.provider, s.model, s.max_tool_calls) == ("ollama", "llama-x", 4)
        assert (s.max_iterations, s.context_window) == (7, 50_000)  # agents.defaults
        assert await router.resolve("helper") is loop and router.resolutions == 1

    async def test_database_overrides_config_field_by_field(
        self, db: Database, tmp_path: Path
    ) -> None:
        store = SqlAgentStore(db)
        router = make_router(tmp_path, store)
        assert (await router.resolve("support")).settings.model == "llama-x"
        await router.save(AgentConfig(id="support", model="big", system_prompt="from db"))
        s = (await router.resolve("support")).settings  # save() invalidated the cache
        assert (s.model, s.system_prompt) == ("big", "from db")  # the database wins
        assert (s.provider, s.max_iterations) == ("ollama", 7)  # config.yaml, then defaults
        assert await router.remove("support") is True
        s = (await router.resolve("support")).settings
        assert (s.model, s.max_iterations, s.system_prompt) == ("llama-x", 7, "be kind")

    async def test_change_by_another_process_is_seen_after_the_ttl(
        self, db: Database, tmp_path: Path
    ) -> None:
        clock = Clock()
        router = make_router(tmp_path, SqlAgentStore(db), clock, ttl=60)
        other_process = SqlAgentStore(db)
        await other_process.upsert(AgentConfig(id="helper", model="v1"))
        first = await router.resolve("helper")
        await other_process.upsert(AgentConfig(id="helper", model="v2"))
        clock.now += 59
        assert await router.resolve("helper") is first
        clock.now += 2
        assert (await router.resolve("helper")).settings.model == "v2"
        await other_process.delete("helper")
        clock.now += 61
        with pytest.raises(UnknownAgent):
            await router.resolve("helper")

    async def test_unknown_agent_names_configured_and_stored(
        self, db: Database, tmp_path: Path
    ) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="stored-one"))
        router = make_router(tmp_path, store)
        with pytest.raises(UnknownAgent) as info:
            await router.resolve("ghost")
        message = str(info.value)
        assert "unknown agent 'ghost'" in message
        assert "configured: main, support" in message and "stored: stored-one" in message
        assert info.value.stored == ["stored-one"]

    async def test_save_rejects_unknown_provider(self, db: Database, tmp_path: Path) -> None:
        router = make_router(tmp_path, SqlAgentStore(db))
        with pytest.raises(ValueError, match=r"unknown provider 'nope' \(defined: ollama, openai"):
            await router.save(AgentConfig(id="x", provider="nope"))
        assert await SqlAgentStore(db).get("x") is None

    async def test_stored_provider_removed_from_config_falls_back_to_default(
        self, db: Database, tmp_path: Path
    ) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="old", provider="gone", model="gone-model"))
        router = make_router(tmp_path, store)
        with capture_logs() as logs:
            s = (await router.resolve("old")).settings
        assert (s.provider, s.model) == ("openai", "gpt-4o-mini")
        assert any(e["event"] == "agent.unknown_provider" for e in logs)


class FlakyStore:
    """An agent store whose database can go away."""

    def __init__(self) -> None:
        self.agents: dict[str, StoredAgent] = {}
        self.down = False
        self.gets = 0

    async def get(self, agent_id: str) -> StoredAgent | None:
        self.gets += 1
        await asyncio.sleep(0)  # kept: a yield, concurrent callers interleave
        if self.down:
            raise ConnectionError("database is down")
        return self.agents.get(agent_id)

    async def list(self) -> Sequence[StoredAgent]:
        return list(self.agents.values())

    async def upsert(self, agent: AgentConfig) -> None:
        raise NotImplementedError

    async def delete(self, agent_id: str) -> bool:
        raise NotImplementedError


class TestRouterEdges:
    async def test_expired_loop_keeps_serving_while_the_database_is_down(
        self, tmp_path: Path
    ) -> None:
        clock, store = Clock(), FlakyStore()
        router = make_router(tmp_path, store, clock)
        first = await router.resolve("main")
        store.down = True
        clock.now += 61
        with capture_logs() as logs:
            assert await router.resolve("main") is first
        assert [e["event"] for e in logs] == ["agent.store_unavailable"]
        with pytest.raises(ConnectionError):
            await router.resolve("support")  # nothing cached to fall back to
        store.down = False
        assert await router.resolve("main") is not first

    async def test_concurrent_misses_resolve_once(self, tmp_path: Path) -> None:
        store = FlakyStore()
        router = make_router(tmp_path, store)
        loops = await asyncio.gather(*(router.resolve("main") for _ in range(5)))
        assert all(loop is loops[0] for loop in loops)
        assert router.resolutions == 1 and store.gets == 1

    async def test_sync_get_refuses_to_skip_the_database(self, tmp_path: Path) -> None:
        router = make_router(tmp_path, FlakyStore())
        with pytest.raises(RuntimeError, match="resolve"):
            router.get("main")


# --- end to end: the unknown-agent reply --------------------------------------------------


async def test_agent_deleted_from_the_database_gets_a_clear_reply(
    tmp_path: Path, llm: FakeLLM
) -> None:
    config = make_config(tmp_path, llm, agents={"default": "helper", "cache_ttl": 0})
    async with await open_database(config.database.url) as db:
        await SqlAgentStore(db).upsert(AgentConfig(id="helper", model="helper-model"))
    async with Loopgate(config) as app:
        dm = ChatDriver(app, ChatRef("web", "dm-1", ChatType.DIRECT))
        llm.script(text("hi from helper"))
        result = await dm.ask("hello")
        assert result is not None and result.status is RunStatus.COMPLETED
        assert llm.chat_requests[-1].json["model"] == "helper-model"
        # Another process (loopgate agents delete) removes it; cache_ttl 0: seen at once.
        assert await SqlAgentStore(app.db).delete("helper")
        with capture_logs() as logs:
            result = await dm.ask("still there?")
        assert result is not None and result.status is RunStatus.FAILED
        assert dm.texts() == ["hi from helper", config.bot.unknown_agent_reply]
        assert len(llm.chat_requests) == 1
        failed = [e for e in logs if e["event"] == "run.unknown_agent"]
        assert failed and failed[0]["agent_id"] == "helper"
        assert "unknown agent 'helper'" in failed[0]["error"]


async def test_start_up_warns_about_a_channel_agent_nobody_defines(tmp_path: Path) -> None:
    config = make_config(tmp_path, None, channels={"telegram": {"agent": "ghost"}})
    with capture_logs() as logs:
        async with Loopgate(config):
            pass
    warnings = [e for e in logs if e["event"] == "agent.unknown"]
    assert [(w["key"], w["agent_id"]) for w in warnings] == [("channels.telegram.agent", "ghost")]


def test_channel_may_name_an_agent_only_the_database_defines() -> None:
    config = parse_config({"channels": {"slack": {"agent": "db-only"}}}, {})
    assert config.channels.slack.agent == "db-only"
