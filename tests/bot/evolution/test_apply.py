"""Applying a suggestion's change to the stored agent and undoing it (``bot/evolution/apply.py``):
how an agent resolves for the rules, the value a change sets, and a rollback that puts back
only the field it changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config import AgentConfig
from bot.evolution.apply import apply_change, new_value, revert_change, view_agent
from bot.storage import Database, SqlAgentStore
from tests.evolution_support import evolution_config


def param(to: int, name: str = "max_iterations") -> dict[str, Any]:
    return {"kind": "param", "param": name, "from": 20, "to": to}


class TestView:
    async def test_config_and_stored_row_merge(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(
            tmp_path,
            list=[{"id": "helper", "max_iterations": 7, "disabled_tools": ["exec"]}],
            defaults={"history_limit": 40, "evolution_guardrails": {"locked_params": ["soul"]}},
        )
        agents = SqlAgentStore(db)
        await agents.upsert(AgentConfig(id="helper", system_prompt="Be brief."))
        view = await view_agent(config, agents, "helper")
        assert view.known and view.stored == AgentConfig(id="helper", system_prompt="Be brief.")
        assert view.params["max_iterations"] == 7 and view.params["history_limit"] == 40
        assert view.system_prompt == "Be brief." and view.disabled_tools == ("exec",)
        assert view.guardrails.soul_locked
        assert Path(view.workspace).is_absolute()
        assert view.workspace == str((tmp_path / "workspaces").resolve())

    async def test_who_is_known(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(tmp_path, default="front")
        agents = SqlAgentStore(db)
        for agent_id, known in (("main", True), ("front", True), ("ghost", False)):
            view = await view_agent(config, agents, agent_id)
            assert view.known is known, agent_id
            assert view.definition is None and view.stored is None
        await agents.upsert(AgentConfig(id="ghost"))
        assert (await view_agent(config, agents, "ghost")).known


class TestNewValue:
    async def test_each_kind(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(
            tmp_path,
            list=[{"id": "main", "disabled_tools": ["exec"]}],
            defaults={"system_prompt": "Help.\n"},
        )
        view = await view_agent(config, SqlAgentStore(db), "main")
        assert new_value(view, param(22)) == ("max_iterations", 22)
        assert new_value(view, {"kind": "param", "param": "history_limit", "to": "9"}) == (
            "history_limit", 9
        )  # fmt: skip
        tools = {"kind": "tool_policy", "disable": ["web_fetch", "exec"]}
        assert new_value(view, tools) == ("disabled_tools", ["exec", "web_fetch"])
        prompt = {"kind": "prompt", "append": "  Check the file first.\n"}
        assert new_value(view, prompt) == ("system_prompt", "Help.\n\nCheck the file first.")

    async def test_a_prompt_appended_to_nothing_is_the_text(
        self, db: Database, tmp_path: Path
    ) -> None:
        config = evolution_config(tmp_path, defaults={"system_prompt": "   "})
        view = await view_agent(config, SqlAgentStore(db), "main")
        assert new_value(view, {"kind": "prompt", "append": "Be kind."}) == (
            "system_prompt", "Be kind."
        )  # fmt: skip

    async def test_refused_changes(self, db: Database, tmp_path: Path) -> None:
        view = await view_agent(evolution_config(tmp_path), SqlAgentStore(db), "main")
        with pytest.raises(ValueError, match="'context_window' is not a parameter"):
            new_value(view, param(9000, "context_window"))
        with pytest.raises(ValueError, match="unknown change kind 'rename'"):
            new_value(view, {"kind": "rename"})


class TestApplyAndRevert:
    async def test_a_row_made_by_the_change_goes_away_with_it(
        self, db: Database, tmp_path: Path
    ) -> None:
        config, agents = evolution_config(tmp_path), SqlAgentStore(db)
        view = await view_agent(config, agents, "main")
        previous = await apply_change(agents, view, param(22))
        assert previous == {
            "field": "max_iterations",
            "row_existed": False,
            "was_set": False,
            "value": None,
            "applied_value": 22,
        }
        stored = await agents.get("main")
        assert stored is not None and stored.agent.max_iterations == 22
        await revert_change(agents, "main", previous)
        assert await agents.get("main") is None

    async def test_revert_restores_the_field_and_keeps_later_edits(
        self, db: Database, tmp_path: Path
    ) -> None:
        config, agents = evolution_config(tmp_path), SqlAgentStore(db)
        await agents.upsert(AgentConfig(id="main", max_iterations=15, model="m1"))
        previous = await apply_change(agents, await view_agent(config, agents, "main"), param(17))
        assert (previous["was_set"], previous["value"]) == (True, 15)
        await agents.upsert(AgentConfig(id="main", max_iterations=17, model="m2"))  # edited since
        await revert_change(agents, "main", previous)
        stored = await agents.get("main")
        assert stored is not None
        assert (stored.agent.max_iterations, stored.agent.model) == (15, "m2")

    async def test_a_created_row_edited_since_is_kept_without_the_field(
        self, db: Database, tmp_path: Path
    ) -> None:
        config, agents = evolution_config(tmp_path), SqlAgentStore(db)
        change = {"kind": "tool_policy", "disable": ["exec"]}
        previous = await apply_change(agents, await view_agent(config, agents, "main"), change)
        await agents.upsert(AgentConfig(id="main", disabled_tools=["exec"], model="m2"))
        await revert_change(agents, "main", previous)
        stored = await agents.get("main")
        assert stored is not None
        assert stored.agent.disabled_tools is None and stored.agent.model == "m2"

    async def test_an_invalid_value_is_not_stored(self, db: Database, tmp_path: Path) -> None:
        config, agents = evolution_config(tmp_path), SqlAgentStore(db)
        view = await view_agent(config, agents, "main")
        with pytest.raises(ValueError):  # pydantic's ValidationError: max_iterations le=200
            await apply_change(agents, view, param(500))
        assert await agents.get("main") is None
