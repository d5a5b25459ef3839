"""Suggestions for the dashboard (``bot/admin/suggestions.py``): the ``?status=`` filter, a
suggestion as JSON, and an admin's decision passed on to the evolution service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.admin import suggestions
from bot.admin.suggestions import as_dict, parse_status
from bot.app import Loopgate
from bot.evolution.records import SuggestionStatus
from bot.storage import SqlAgentStore
from channels import ChatRef, ChatType
from tests.admin_support import admin_config, seed_suggestion
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


def test_parse_status() -> None:
    assert parse_status(None) is None and parse_status("") is None
    assert parse_status("all") is None
    assert parse_status("pending") is SuggestionStatus.PENDING
    with pytest.raises(ValueError):
        parse_status("PENDING")  # the stored spelling only


async def test_as_dict_is_json_ready(admin_app: Loopgate) -> None:
    suggestion = await seed_suggestion(admin_app)
    data = as_dict(suggestion)
    assert data["status"] == "pending" and data["created_at"] == suggestion.created_at.isoformat()
    assert data["change_text"] == "max_iterations 20 → 22"
    assert (data["decided_at"], data["applied_at"], data["history"]) == (None, None, [])


class TestDecide:
    async def test_approve_applies_and_records_who(self, admin_app: Loopgate) -> None:
        suggestion = await seed_suggestion(admin_app)
        decided = await suggestions.decide(
            admin_app, suggestion.id, approve=True, by="admin (bearer)"
        )
        assert decided is not None
        assert (decided["status"], decided["decided_by"]) == ("applied", "admin (bearer)")
        assert decided["decided_at"] is not None and decided["applied_at"] is not None
        stored = await SqlAgentStore(admin_app.db).get("main")
        assert stored is not None and stored.agent.max_iterations == 22

    async def test_reject_keeps_the_reason_and_changes_nothing(self, admin_app: Loopgate) -> None:
        suggestion = await seed_suggestion(admin_app)
        decided = await suggestions.decide(
            admin_app, suggestion.id, approve=False, by="admin (session)", reason="not now"
        )
        assert decided is not None
        assert (decided["status"], decided["reason"]) == ("rejected", "not now")
        assert await SqlAgentStore(admin_app.db).get("main") is None

    async def test_unknown_is_none_and_decided_twice_is_an_error(self, admin_app: Loopgate) -> None:
        assert await suggestions.decide(admin_app, "nope", approve=True, by="x") is None
        suggestion = await seed_suggestion(admin_app)
        await suggestions.decide(admin_app, suggestion.id, approve=False, by="x")
        with pytest.raises(ValueError):
            await suggestions.decide(admin_app, suggestion.id, approve=True, by="x")


async def test_list_and_get(admin_app: Loopgate) -> None:
    first = await seed_suggestion(admin_app, agent_id="main")
    second = await seed_suggestion(admin_app, agent_id="other")
    await suggestions.decide(admin_app, second.id, approve=False, by="x")
    pending = await suggestions.list_suggestions(admin_app, status=SuggestionStatus.PENDING)
    assert [s["id"] for s in pending] == [first.id]
    others = await suggestions.list_suggestions(admin_app, agent_id="other")
    assert [s["id"] for s in others] == [second.id]
    found = await suggestions.get_suggestion(admin_app, first.id)
    assert found is not None and found["summary"] == first.summary
    assert await suggestions.get_suggestion(admin_app, "nope") is None


async def test_metrics_of_the_agents_that_ran(admin_app: Loopgate) -> None:
    assert await suggestions.metrics(admin_app) == []  # no run yet
    chat = ChatDriver(admin_app, ChatRef("web", "dm-alice", ChatType.DIRECT))
    await chat.ask("hello")
    [main] = await suggestions.metrics(admin_app, "main")
    assert main["agent_id"] == "main" and main["runs"] == 1
    assert await suggestions.metrics(admin_app, "other") == []
