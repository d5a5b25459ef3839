"""SqlOrchestrationStore: links, teams and the team task board, on SQLite and (when
LOOPGATE_TEST_POSTGRES_URL is set) Postgres.

The task state changes are compare-and-set: the concurrency tests open several
:class:`Database` objects on one database, like several processes, so that neither the writer
queue of one process nor the event loop can serialise them for the store.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from sqlalchemy import func, select

from agent_core.orchestration.memory_store import MemoryOrchestrationStore
from agent_core.orchestration.records import (
    AgentLink,
    LinkDirection,
    OrchestrationStore,
    TaskConflict,
    TaskStatus,
    TaskStore,
    Team,
    TeamSettings,
    WorkspaceScope,
)
from bot.storage import Database, SqlOrchestrationStore
from bot.storage.models import TeamTaskRow
from tests.storage_support import Backend

OUT = LinkDirection.OUTBOUND


@asynccontextmanager
async def processes(backend: Backend, n: int) -> AsyncIterator[list[SqlOrchestrationStore]]:
    """``n`` stores, each on a Database of its own (own pool, own writer queue)."""
    async with AsyncExitStack() as stack:
        dbs = [await stack.enter_async_context(await backend.open()) for _ in range(n)]
        yield [SqlOrchestrationStore(db) for db in dbs]


async def team_store(db: Database | SqlOrchestrationStore, *teams: Team) -> SqlOrchestrationStore:
    """A store with ``teams`` (default: dev, led by lead, with ann and bob)."""
    store = db if isinstance(db, SqlOrchestrationStore) else SqlOrchestrationStore(db)
    for team in teams or (Team("dev", "lead", ("ann", "bob")),):
        await store.create_team(team)
    return store


@pytest.mark.parametrize("protocol", [OrchestrationStore, TaskStore])
def test_methods_match_the_agent_core_protocols(protocol: type) -> None:
    names = [n for n in vars(protocol) if not n.startswith("_")]
    assert names
    for name in names:
        expected = inspect.signature(getattr(protocol, name))
        assert inspect.signature(getattr(SqlOrchestrationStore, name)) == expected, name
        assert inspect.iscoroutinefunction(getattr(SqlOrchestrationStore, name)), name


# --- links ----------------------------------------------------------------------------------


async def test_links_add_list_links_of_and_remove(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    assert await store.list_links() == []
    first = await store.add_link(AgentLink("main", "support", OUT, "billing"))
    assert first == AgentLink("main", "support", OUT, "billing")
    await store.add_link(AgentLink("coder", "main", LinkDirection.BIDIRECTIONAL))
    await store.add_link(AgentLink("ann", "bob"))
    assert [(k.source, k.target) for k in await store.list_links()] == [
        ("ann", "bob"),
        ("coder", "main"),
        ("main", "support"),
    ]
    assert await store.links_of("main") == [
        AgentLink("main", "support", OUT, "billing"),
        AgentLink("coder", "main", LinkDirection.BIDIRECTIONAL, ""),
    ]
    assert await store.links_of("nobody") == []
    assert await store.remove_link("main", "support") is True
    assert await store.remove_link("main", "support") is False
    assert await store.remove_link("support", "coder") is False
    assert [k.target for k in await store.links_of("main")] == ["main"]


async def test_add_link_upserts_the_pair(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    await store.add_link(AgentLink("a", "b", OUT, "old"))
    replaced = await store.add_link(AgentLink("a", "b", LinkDirection.INBOUND, "new\x00"))
    assert replaced == AgentLink("a", "b", LinkDirection.INBOUND, "new\ufffd")
    assert await store.list_links() == [replaced]
    await store.add_link(AgentLink("b", "a"))  # the reverse pair is a link of its own
    assert len(await store.list_links()) == 2


async def test_add_link_refuses_self_and_bad_ids(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    with pytest.raises(ValueError, match="can't link to itself"):
        await store.add_link(AgentLink("a", "a"))
    with pytest.raises(ValueError, match="invalid agent id"):
        await store.add_link(AgentLink("a", "x" * 65))
    assert await store.list_links() == []


# --- teams ----------------------------------------------------------------------------------


async def test_team_create_get_list_and_team_of(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    settings = TeamSettings(shared_workspace=True, workspace_scope=WorkspaceScope.USER)
    created = await store.create_team(
        Team("dev", "lead", ("ann", "lead", "bob", "ann"), settings, "the builders")
    )
    assert created == Team("dev", "lead", ("ann", "bob"), settings, "the builders")
    await store.create_team(Team("ops", "oncall"))
    assert await store.get_team("dev") == created
    assert await store.get_team("nope") is None
    assert [t.id for t in await store.list_teams()] == ["dev", "ops"]
    assert await store.team_of("lead") == created
    assert await store.team_of("bob") == created
    assert (await store.team_of("oncall") or Team("?", "?")).settings == TeamSettings()
    assert await store.team_of("stranger") is None


async def test_an_agent_is_in_at_most_one_team(db: Database) -> None:
    store = await team_store(db)
    with pytest.raises(ValueError, match="team 'dev' exists"):
        await store.create_team(Team("dev", "other"))
    with pytest.raises(ValueError, match="ann is already a member of team dev"):
        await store.create_team(Team("qa", "ann"))
    with pytest.raises(ValueError, match="lead already leads team dev"):
        await store.create_team(Team("qa", "carl", ("lead",)))
    await store.create_team(Team("qa", "carl"))
    with pytest.raises(ValueError, match="bob is already a member of team dev"):
        await store.add_member("qa", "bob")
    with pytest.raises(ValueError, match="carl already leads team qa"):
        await store.add_member("qa", "carl")
    assert [t.id for t in await store.list_teams()] == ["dev", "qa"]
    assert (await store.get_team("qa") or Team("?", "?")).members == ()


async def test_add_and_remove_members(db: Database) -> None:
    store = await team_store(db)
    added = await store.add_member("dev", "cy")
    assert added.members == ("ann", "bob", "cy")
    removed = await store.remove_member("dev", "ann")
    assert removed.members == ("bob", "cy")
    assert await store.get_team("dev") == removed
    assert await store.team_of("ann") is None
    with pytest.raises(ValueError, match="lead leads team dev"):
        await store.remove_member("dev", "lead")
    with pytest.raises(ValueError, match="ann is not a member of team dev"):
        await store.remove_member("dev", "ann")
    with pytest.raises(ValueError, match="no team 'nope'"):
        await store.remove_member("nope", "bob")
    with pytest.raises(ValueError, match="no team 'nope'"):
        await store.add_member("nope", "zed")


async def test_delete_team_cascades_its_tasks(db: Database) -> None:
    store = await team_store(db, Team("dev", "lead"), Team("ops", "oncall"))
    gone = await store.create_task("dev", "t", "d", created_by="lead")
    kept = await store.create_task("ops", "t", "d", created_by="oncall")
    assert await store.delete_team("dev") is True
    assert await store.delete_team("dev") is False
    assert await store.get_task(gone.id) is None
    assert await store.get_task(kept.id) == kept
    count = select(func.count()).select_from(TeamTaskRow)
    assert await db.run_read(lambda conn: conn.execute(count).scalar()) == 1
    assert await store.team_of("lead") is None
    await store.create_team(Team("dev2", "lead"))  # free to join another team now


async def test_concurrent_team_creation_keeps_one_team_per_agent(backend: Backend) -> None:
    async with processes(backend, 4) as stores:
        results = await asyncio.gather(
            *(s.create_team(Team(f"t{i}", f"lead{i}", ("shared",))) for i, s in enumerate(stores)),
            return_exceptions=True,
        )
        assert sum(isinstance(r, Team) for r in results) == 1
        assert all(isinstance(r, (Team, ValueError)) for r in results), results
        assert len(await stores[0].list_teams()) == 1


# --- tasks ----------------------------------------------------------------------------------


async def test_create_get_and_list_tasks(db: Database) -> None:
    store = await team_store(db, Team("dev", "lead"), Team("ops", "oncall"))
    first = await store.create_task("dev", "Write\x00 docs", "all of them", created_by="lead")
    second = await store.create_task("dev", "Fix", "bug", created_by="lead", assignee="ann")
    await store.create_task("ops", "Other team", "", created_by="oncall")
    assert len(first.id) == 12 and int(first.id, 16) >= 0
    assert (first.status, first.assignee, first.title) == (
        TaskStatus.OPEN,
        None,
        "Write\ufffd docs",
    )
    assert (second.status, second.assignee) == (TaskStatus.ASSIGNED, "ann")
    assert first.created_at == first.updated_at and first.created_at.tzinfo is not None
    assert first.comments == () and first.result is None and first.created_by == "lead"
    assert await store.get_task(first.id) == first
    assert await store.get_task("missing") is None
    assert [t.id for t in await store.list_tasks("dev")] == [first.id, second.id]
    assert await store.list_tasks("dev", TaskStatus.ASSIGNED) == [second]
    assert await store.list_tasks("dev", TaskStatus.COMPLETED) == []
    assert await store.list_tasks("nope") == []


async def test_create_task_in_unknown_team_conflicts(db: Database) -> None:
    store = SqlOrchestrationStore(db)
    with pytest.raises(TaskConflict, match="no team 'ghost'"):
        await store.create_task("ghost", "t", "d", created_by="x")


async def test_assign(db: Database) -> None:
    store = await team_store(db)
    task = await store.create_task("dev", "t", "d", created_by="lead")
    assigned = await store.assign_task(task.id, "ann")
    assert (assigned.status, assigned.assignee) == (TaskStatus.ASSIGNED, "ann")
    assert assigned.updated_at >= task.updated_at
    reassigned = await store.assign_task(task.id, "bob")
    assert reassigned.assignee == "bob" and await store.get_task(task.id) == reassigned
    await store.claim_task(task.id, "bob")
    with pytest.raises(TaskConflict, match="is in_progress: it can't be reassigned"):
        await store.assign_task(task.id, "ann")
    with pytest.raises(TaskConflict, match="no task 'nope'"):
        await store.assign_task("nope", "ann")


async def test_claim(db: Database) -> None:
    store = await team_store(db)
    open_task = await store.create_task("dev", "t", "d", created_by="lead")
    claimed = await store.claim_task(open_task.id, "bob")
    assert (claimed.status, claimed.assignee) == (TaskStatus.IN_PROGRESS, "bob")
    with pytest.raises(TaskConflict, match=r"is in_progress \(assignee bob\): it can't be claimed"):
        await store.claim_task(open_task.id, "ann")
    for_ann = await store.create_task("dev", "t", "d", created_by="lead", assignee="ann")
    with pytest.raises(TaskConflict, match=r"is assigned \(assignee ann\)"):
        await store.claim_task(for_ann.id, "bob")
    assert (await store.claim_task(for_ann.id, "ann")).status is TaskStatus.IN_PROGRESS
    with pytest.raises(TaskConflict, match="no task 'nope'"):
        await store.claim_task("nope", "ann")


async def test_concurrent_claims_exactly_one_wins(backend: Backend) -> None:
    async with processes(backend, 6) as stores:
        await team_store(stores[0])
        for _ in range(3):  # a few rounds: the race must be lost every time, not by luck
            task = await stores[0].create_task("dev", "t", "d", created_by="lead")
            agents = [f"agent{i}" for i in range(len(stores))]
            results = await asyncio.gather(
                *(s.claim_task(task.id, a) for s, a in zip(stores, agents, strict=True)),
                return_exceptions=True,
            )
            winners = [r for r in results if not isinstance(r, BaseException)]
            assert len(winners) == 1, results
            losers = [r for r in results if isinstance(r, BaseException)]
            assert all(isinstance(r, TaskConflict) for r in losers), losers
            assert all("is in_progress" in str(r) for r in losers)
            stored = await stores[0].get_task(task.id)
            assert stored is not None and stored.assignee == winners[0].assignee


async def test_finish(db: Database) -> None:
    store = await team_store(db)
    task = await store.create_task("dev", "t", "d", created_by="lead", assignee="ann")
    with pytest.raises(TaskConflict, match="is assigned and belongs to ann"):
        await store.finish_task(task.id, "bob", TaskStatus.COMPLETED, "mine now")
    assert (await store.get_task(task.id)) == task  # refused: nothing changed
    await store.claim_task(task.id, "ann")
    with pytest.raises(TaskConflict, match="is in_progress and belongs to ann"):
        await store.finish_task(task.id, "bob", TaskStatus.COMPLETED, "mine now")
    done = await store.finish_task(task.id, "ann", TaskStatus.COMPLETED, "done\nsecond line")
    assert (done.status, done.result, done.assignee) == (
        TaskStatus.COMPLETED,
        "done\nsecond line",
        "ann",
    )
    with pytest.raises(TaskConflict, match="is already completed"):
        await store.finish_task(task.id, "ann", TaskStatus.FAILED, "again")
    with pytest.raises(TaskConflict, match="is already completed"):
        await store.finish_task(task.id, None, TaskStatus.CANCELLED, "by the lead")
    with pytest.raises(TaskConflict, match="no task 'nope'"):
        await store.finish_task("nope", None, TaskStatus.CANCELLED, "")


async def test_finish_unassigned_takes_it_and_none_finishes_anyones(db: Database) -> None:
    store = await team_store(db)
    open_task = await store.create_task("dev", "t", "d", created_by="lead")
    failed = await store.finish_task(open_task.id, "bob", TaskStatus.FAILED, "can't")
    assert (failed.status, failed.assignee) == (TaskStatus.FAILED, "bob")
    for_ann = await store.create_task("dev", "t", "d", created_by="lead", assignee="ann")
    cancelled = await store.finish_task(for_ann.id, None, TaskStatus.CANCELLED, "not needed")
    assert (cancelled.status, cancelled.assignee) == (TaskStatus.CANCELLED, "ann")
    nobody = await store.create_task("dev", "t", "d", created_by="lead")
    closed = await store.finish_task(nobody.id, None, TaskStatus.CANCELLED, "")
    assert (closed.status, closed.assignee) == (TaskStatus.CANCELLED, None)


async def test_comments_append_and_survive_concurrency(backend: Backend) -> None:
    async with processes(backend, 4) as stores:
        await team_store(stores[0])
        task = await stores[0].create_task("dev", "t", "d", created_by="lead")
        first = await stores[0].comment_task(task.id, "ann", "hello\x00")
        assert [(c.author, c.text) for c in first.comments] == [("ann", "hello\ufffd")]
        assert first.comments[0].at.tzinfo is not None and first.status is TaskStatus.OPEN
        await asyncio.gather(
            *(
                s.comment_task(task.id, f"a{i}", f"n{j}")
                for j in range(3)
                for i, s in enumerate(stores)
            )
        )
        stored = await stores[0].get_task(task.id)
        assert stored is not None and len(stored.comments) == 1 + 3 * len(stores)
        assert stored.comments[0].text == "hello\ufffd"  # appended, never replaced
        with pytest.raises(TaskConflict, match="no task 'nope'"):
            await stores[0].comment_task("nope", "ann", "x")


async def test_same_semantics_as_the_memory_store(db: Database) -> None:
    """One scripted board life on both stores: every outcome (result or conflict) agrees."""
    team = Team("dev", "lead", ("ann", "bob"))
    sql = await team_store(db, team)
    memory = MemoryOrchestrationStore(teams=[team])

    async def script(store: TaskStore) -> list[str]:
        outcomes: list[str] = []
        a = await store.create_task("dev", "a", "", created_by="lead")
        b = await store.create_task("dev", "b", "", created_by="lead", assignee="ann")
        steps = [
            lambda: store.claim_task(b.id, "bob"),
            lambda: store.assign_task(b.id, "bob"),
            lambda: store.claim_task(b.id, "bob"),
            lambda: store.assign_task(b.id, "ann"),
            lambda: store.finish_task(b.id, "ann", TaskStatus.COMPLETED, "x"),
            lambda: store.finish_task(b.id, "bob", TaskStatus.COMPLETED, "ok"),
            lambda: store.finish_task(b.id, None, TaskStatus.FAILED, "again"),
            lambda: store.comment_task(a.id, "ann", "note"),
            lambda: store.finish_task(a.id, "ann", TaskStatus.FAILED, "no"),
            lambda: store.claim_task(a.id, "ann"),
        ]
        for step in steps:
            try:
                t = await step()
                outcomes.append(f"{t.status}/{t.assignee}/{t.result}/{len(t.comments)}")
            except TaskConflict:
                outcomes.append("conflict")
        return outcomes

    assert await script(sql) == await script(memory)
    assert await sql.team_of("ann") == await memory.team_of("ann")
