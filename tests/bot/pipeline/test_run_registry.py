"""The active run registry, and concurrent runs of one session never interleaving history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_core import AgentSettings, EventBus, Loop, RunRequest, Tool, ToolRegistry
from agent_core.providers import DeltaHandler, ModelRequest, ModelResponse
from agent_core.testing import call, reply, tool_calls
from bot.pipeline.run_registry import ActiveRun, LocalRunRegistry
from bot.storage import Database, SqlSessionStore, SqlTraceStore, open_database
from bot.storage.models import MessageRow


async def _forever() -> None:
    await asyncio.Event().wait()


class TestRegistry:
    async def test_register_abort_with_ownership_and_counters(self) -> None:
        registry = LocalRunRegistry()
        tasks = [asyncio.create_task(_forever()) for _ in range(3)]
        registry.register(ActiveRun("r1", "main", "s1", "alice", tasks[0]))  # type: ignore[arg-type]
        registry.register(ActiveRun("r2", "main", "s1", "bob", tasks[1]))  # type: ignore[arg-type]
        registry.register(ActiveRun("r3", "helper", "s2", "carol", tasks[2]))  # type: ignore[arg-type]
        assert registry.active_runs == 3
        assert registry.active_runs_by_agent() == {"main": 2, "helper": 1}
        assert not registry.abort("r3", "s1")  # s1 does not own r3
        assert not tasks[2].cancelled() and not tasks[2].done()
        assert registry.abort("r1", "s1")
        assert registry.abort_session("s1") == 2  # r1 (not done yet) and r2
        await asyncio.gather(*tasks[:2], return_exceptions=True)
        assert tasks[0].cancelled() and tasks[1].cancelled() and not tasks[2].done()
        assert [r.run_id for r in registry.runs_of("s2")] == ["r3"]
        for run_id in ("r1", "r2"):
            registry.unregister(run_id)
        assert registry.active_runs == 1
        tasks[2].cancel()
        await asyncio.gather(tasks[2], return_exceptions=True)

    async def test_abort_unknown_run(self) -> None:
        assert not LocalRunRegistry().abort("nope", "s")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    yield database
    await database.aclose()


class PerRunProvider:
    """Answers each run by its own user message: first a tool call, then a final answer."""

    name = "per-run"

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        user_at = max(i for i, m in enumerate(request.messages) if m.role == "user")
        user = request.messages[user_at].content
        if any(m.role == "tool" for m in request.messages[user_at:]):
            return reply(f"answer to {user}")
        return tool_calls(call("rendezvous", {"who": user}), text=f"working on {user}")

    async def aclose(self) -> None:
        return None


async def test_concurrent_runs_of_one_session_do_not_interleave(
    db: Database, tmp_path: Path
) -> None:
    arrived = 0
    both_inside = asyncio.Event()

    async def rendezvous(args: dict[str, Any], ctx: Any) -> str:
        # Each run waits inside its tool until the other one is there too: the runs are
        # guaranteed to overlap, whatever the scheduling.
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_inside.set()
        await asyncio.wait_for(both_inside.wait(), 10)
        return f"met {args['who']}"

    store = SqlSessionStore(db)
    loop = Loop(
        AgentSettings(id="main", model="m", workspace=tmp_path / "ws"),
        PerRunProvider(),
        ToolRegistry.of([Tool("rendezvous", "r", {"type": "object"}, rendezvous)]),
        store,
        SqlTraceStore(db),
        EventBus(),
    )
    runs = [
        RunRequest(session_key="group", message=f"q{i}", user_id=f"u{i}", run_id=f"run{i}")
        for i in range(2)
    ]
    started = [asyncio.create_task(loop.run(r)) for r in runs]
    results = await asyncio.gather(*started)
    assert [r.content for r in results] == ["answer to q0", "answer to q1"]
    assert loop.active_runs == 0
    rows = await db.run_read(
        lambda conn: conn.execute(select(MessageRow).order_by(MessageRow.id)).all()
    )
    order = [r.run_id for r in rows]
    # Four messages per run (user, assistant+call, tool, answer), each run in one block.
    assert sorted(order) == ["run0"] * 4 + ["run1"] * 4
    assert order in (["run0"] * 4 + ["run1"] * 4, ["run1"] * 4 + ["run0"] * 4)
    for run_id in ("run0", "run1"):
        roles = [r.role for r in rows if r.run_id == run_id]
        assert roles == ["user", "assistant", "tool", "assistant"]
    info = await store.get_session("group")
    assert info is not None and info.usage.input_tokens == 40  # 2 runs x 2 calls x 10
