"""bot/storage/_orchestration_rows.py: the id rule, and the orchestration tables' rows read
back as the agent core's records (on each backend), a row an operator edited by hand included.
The store's statements are tested in test_orchestration.py."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import update
from structlog.testing import capture_logs

from agent_core.orchestration import (
    AgentLink,
    LinkDirection,
    TaskStatus,
    Team,
    TeamSettings,
    WorkspaceScope,
)
from bot.storage import Database
from bot.storage._orchestration_rows import check_id, settings_json
from bot.storage.models import TeamRow
from bot.storage.orchestration import SqlOrchestrationStore


@pytest.mark.parametrize("value", ["a", "main", "Agent_2-b", "x" * 64])
def test_valid_ids_pass(value: str) -> None:
    assert check_id(value) == value


@pytest.mark.parametrize("value", ["", "x" * 65, "a b", "a/b", "../x", "ünï", "a\n"])
def test_invalid_ids_name_what_they_are(value: str) -> None:
    with pytest.raises(ValueError, match="invalid team id"):
        check_id(value, "team")
    with pytest.raises(ValueError, match="invalid agent id"):
        check_id(value)


def test_settings_json_stores_the_scope_as_its_value() -> None:
    assert settings_json(TeamSettings()) == {"shared_workspace": False, "workspace_scope": "chat"}
    shared = TeamSettings(shared_workspace=True, workspace_scope=WorkspaceScope.USER)
    assert settings_json(shared) == {"shared_workspace": True, "workspace_scope": "user"}


async def test_a_team_reads_back_as_stored(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    team = Team(
        "crew",
        "lead",
        ("ann", "bob"),
        TeamSettings(shared_workspace=True, workspace_scope=WorkspaceScope.USER),
        "the crew",
    )
    await store.create_team(team)
    assert await store.get_team("crew") == team


async def set_team_settings(db: Database, settings: dict[str, object] | None) -> None:
    stmt = update(TeamRow).where(TeamRow.id == "crew").values(settings=settings)
    await db.run_write(lambda conn: conn.execute(stmt).close())


async def test_an_unknown_scope_falls_back_to_the_chat_and_is_logged(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    await store.create_team(
        Team("crew", "lead", settings=TeamSettings(workspace_scope=WorkspaceScope.USER))
    )
    await set_team_settings(db, {"shared_workspace": 1, "workspace_scope": "galaxy"})
    with capture_logs() as logs:
        team = await store.get_team("crew")
    assert team is not None
    assert team.settings == TeamSettings(shared_workspace=True, workspace_scope=WorkspaceScope.CHAT)
    assert [(e["event"], e["workspace_scope"]) for e in logs] == [("team.invalid_scope", "galaxy")]


async def test_missing_settings_take_the_defaults(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    await store.create_team(Team("crew", "lead", ("ann",)))
    cleared: tuple[dict[str, object] | None, ...] = ({}, None)
    for settings in cleared:
        await set_team_settings(db, settings)
        team = await store.get_team("crew")
        assert team is not None and team.settings == TeamSettings()
        assert team.members == ("ann",)


async def test_links_read_back_with_their_direction(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    for link in (
        AgentLink("a", "b", LinkDirection.BIDIRECTIONAL, "when b knows better"),
        AgentLink("c", "a", LinkDirection.INBOUND),
    ):
        await store.add_link(link)
    assert sorted(await store.links_of("a"), key=lambda link: link.source) == [
        AgentLink("a", "b", LinkDirection.BIDIRECTIONAL, "when b knows better"),
        AgentLink("c", "a", LinkDirection.INBOUND, ""),
    ]


async def test_a_task_reads_back_with_its_comments_in_order(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    await store.create_team(Team("crew", "lead", ("ann",)))
    created = await store.create_task("crew", "Count", "rows", created_by="lead", assignee="ann")
    await store.comment_task(created.id, "ann", "first")
    await store.comment_task(created.id, "lead", "second")
    task = await store.get_task(created.id)
    assert task is not None
    assert (task.title, task.description, task.status, task.assignee, task.result) == (
        "Count",
        "rows",
        TaskStatus.ASSIGNED,
        "ann",
        None,
    )
    assert [(c.author, c.text) for c in task.comments] == [("ann", "first"), ("lead", "second")]
    assert all(isinstance(c.at, datetime) and c.at.tzinfo is not None for c in task.comments)
    assert task.comments[0].at <= task.comments[1].at
