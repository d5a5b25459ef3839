"""Agents as the dashboard lists and edits them (``bot/admin/agent_edit.py``): the fields an
edit may change, the stored copy merged over config, and the errors an edit can meet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.admin import agent_edit
from bot.admin.agent_edit import AgentEditError, parse_changes
from bot.app import Loopgate
from bot.config import AgentConfig
from bot.storage import SqlAgentStore
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    """Two configured agents: ``main`` (the default) and ``writer`` with its own model."""
    config = make_config(
        tmp_path, llm, agents={"list": [{"id": "main"}, {"id": "writer", "model": "w-model"}]}
    )
    async with Loopgate(config) as started:
        yield started


class TestParseChanges:
    def test_blank_and_null_clear_numbers_are_parsed(self) -> None:
        changes = parse_changes(
            {"model": "m2", "system_prompt": "  ", "provider": None, "max_iterations": "7"}
        )
        assert changes == {
            "model": "m2",
            "system_prompt": None,
            "provider": None,
            "max_iterations": 7,
        }
        assert parse_changes({"max_iterations": 9}) == {"max_iterations": 9}  # JSON numbers

    def test_a_number_that_is_not_whole(self) -> None:
        for value in ("x", "7.5"):
            with pytest.raises(AgentEditError) as raised:
                parse_changes({"max_iterations": value})
            assert raised.value.problems == {"max_iterations": "a whole number"}

    def test_unknown_fields_are_each_named(self) -> None:
        with pytest.raises(AgentEditError) as raised:
            parse_changes({"model": "m", "workspace": "/", "id": "other"})
        assert sorted(raised.value.problems) == ["id", "workspace"]
        assert "editable: provider, model" in raised.value.problems["id"]
        assert str(raised.value).startswith("id: not editable here")


class TestSave:
    async def test_changes_merge_over_the_stored_copy(self, app: Loopgate) -> None:
        await agent_edit.save_agent(app, "writer", {"system_prompt": "Be brief."})
        saved = await agent_edit.save_agent(app, "writer", {"max_iterations": 5})
        assert saved["stored"] == {
            "id": "writer",
            "system_prompt": "Be brief.",
            "max_iterations": 5,
        }
        assert saved["source"] == "config+db"
        # the config's model still applies where the stored copy says nothing
        assert saved["resolved"] == {"provider": "openai", "model": "w-model", "max_iterations": 5}
        cleared = await agent_edit.save_agent(app, "writer", {"system_prompt": None})
        assert cleared["stored"] == {"id": "writer", "max_iterations": 5}

    async def test_the_next_message_uses_the_change(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        await dm.ask("before")
        await agent_edit.save_agent(app, "main", {"model": "new-model"})
        await dm.ask("after")
        assert [r.json["model"] for r in llm.chat_requests] == ["fake-model", "new-model"]

    async def test_invalid_values_name_their_field(self, app: Loopgate) -> None:
        with pytest.raises(AgentEditError) as raised:
            await agent_edit.save_agent(app, "main", {"max_iterations": 0, "tools": 1})
        assert set(raised.value.problems) == {"max_iterations", "tools"}
        with pytest.raises(AgentEditError) as bad_id:
            await agent_edit.save_agent(app, "no spaces allowed", {})
        assert list(bad_id.value.problems) == ["id"]
        assert await SqlAgentStore(app.db).list() == []  # nothing stored

    async def test_an_unknown_provider(self, app: Loopgate) -> None:
        with pytest.raises(AgentEditError) as raised:
            await agent_edit.save_agent(app, "main", {"provider": "nobody"})
        assert "nobody" in raised.value.problems["provider"]
        assert await SqlAgentStore(app.db).get("main") is None


class TestRead:
    async def test_list_configured_first_then_stored_only(self, app: Loopgate) -> None:
        await agent_edit.save_agent(app, "helper", {"model": "h"})
        await agent_edit.save_agent(app, "writer", {"model": "w2"})
        listed = await agent_edit.list_agents(app)
        assert [(a["id"], a["source"], a["default"]) for a in listed] == [
            ("main", "config", True),
            ("writer", "config+db", False),
            ("helper", "db", False),
        ]
        writer = listed[1]
        assert writer["configured"] == {"id": "writer", "model": "w-model"}
        assert writer["resolved"]["model"] == "w2" and writer["updated_at"] is not None
        assert listed[0]["stored"] is None and listed[0]["updated_at"] is None

    async def test_get_an_unknown_agent(self, app: Loopgate) -> None:
        assert await agent_edit.get_agent(app, "nobody") is None
        main = await agent_edit.get_agent(app, "main")
        assert main is not None and main["source"] == "config"

    async def test_a_stored_agent_whose_provider_is_gone_resolves_to_the_default(
        self, app: Loopgate
    ) -> None:
        # Stored while the provider existed; the configuration lost it since.
        await SqlAgentStore(app.db).upsert(AgentConfig(id="old", provider="gone", model="x"))
        old = await agent_edit.get_agent(app, "old")
        assert old is not None and old["source"] == "db"
        assert old["stored"] == {"id": "old", "provider": "gone", "model": "x"}
        assert old["resolved"] == {
            "provider": "openai",
            "model": "fake-model",
            "max_iterations": 20,
        }

    async def test_delete_brings_the_config_back(self, app: Loopgate) -> None:
        await agent_edit.save_agent(app, "writer", {"model": "w2"})
        assert await agent_edit.delete_agent(app, "writer")
        writer = await agent_edit.get_agent(app, "writer")
        assert writer is not None and writer["resolved"]["model"] == "w-model"
        assert not await agent_edit.delete_agent(app, "writer")  # nothing stored any more

    def test_providers(self, app: Loopgate) -> None:
        assert agent_edit.providers(app) == sorted(app.config.providers.all())
        assert "openai" in agent_edit.providers(app)
