"""Metrics per agent from the traces/spans tables (SQL aggregation, both backends), their
snapshots as a rolling window, and the ``args_hash`` a real run's tool spans carry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_core.tracing import arguments_digest
from bot.app import Loopgate
from bot.evolution.metrics import compute_metrics
from bot.evolution.records import AgentMetrics, ToolStats
from bot.evolution.service import EvolutionService
from bot.storage import Database
from tests.conftest import ChatDriver
from tests.evolution_support import Call, evolution_config, hours_ago, seed_runs
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls


async def metrics_now(db: Database, agent_id: str | None = None) -> list[AgentMetrics]:
    now = datetime.now(UTC)
    return await compute_metrics(db, now - timedelta(days=7), now, agent_id)


async def test_runs_tools_repeats_tokens_and_latency(db: Database) -> None:
    await seed_runs(
        db,
        4,
        calls=[Call("read_file", args='{"p": 1}'), Call("read_file", args='{"p": 1}')],
        duration_ms=[100, 200, 300, 400],
        tokens=(100, 10),
    )
    await seed_runs(db, 2, status="error", calls=[Call("web_fetch", error=True)])
    await seed_runs(db, 1, status="cancelled", duration_ms=99_999)
    await seed_runs(db, 1, status="max_iterations", calls=[Call("memory_search")] * 2)
    await seed_runs(db, 1, status="running")  # not finished: not counted
    await seed_runs(db, 3, agent_id="other")
    await seed_runs(db, 5, at=hours_ago(24 * 8))  # outside the window

    [main, other] = await metrics_now(db)

    assert (other.agent_id, other.runs) == ("other", 3)
    assert main.agent_id == "main"
    assert (main.runs, main.completed, main.failures, main.cancellations, main.capped) == (
        8,
        4,
        2,
        1,
        1,
    )
    assert main.tools == {
        "read_file": ToolStats(8, 0),
        "web_fetch": ToolStats(2, 2),
        "memory_search": ToolStats(2, 0),
    }
    assert main.tools["web_fetch"].error_rate == 1.0
    assert (main.repeated_tool_calls, main.runs_with_repeats) == (5, 5)
    assert main.repeated_by_tool == {"read_file": 4, "memory_search": 1}
    assert main.memory_search_calls == 2 and main.memory_search_per_run == 0.25
    assert (main.input_tokens, main.output_tokens) == (4 * 100 + 4 * 10, 4 * 10 + 4 * 5)
    # Nearest rank over 7 durations (cancelled runs left out): 100 100 100 100 200 300 400.
    assert (main.latency_p50_ms, main.latency_p95_ms) == (100.0, 400.0)
    # success = 4 / (8 − 1 cancelled); tool errors 2 of 12.
    assert main.quality == pytest.approx(4 / 7 * (1 - 2 / 12))
    assert main.as_dict()["quality"] == round(main.quality, 4)


async def test_one_agent_only_and_an_empty_window(db: Database) -> None:
    assert await metrics_now(db) == []
    await seed_runs(db, 2, agent_id="a")
    await seed_runs(db, 3, agent_id="b")
    [b] = await metrics_now(db, "b")
    assert (b.agent_id, b.runs) == ("b", 3)


async def test_child_runs_count_for_their_agent(db: Database) -> None:
    [parent] = await seed_runs(db, 1)
    await seed_runs(db, 2, agent_id="helper", parent_trace_id=parent)
    [helper] = await metrics_now(db, "helper")
    assert helper.runs == 2


async def test_percentiles_on_a_hundred_runs(db: Database) -> None:
    await seed_runs(db, 100, duration_ms=[float(i) for i in range(1, 101)])
    [m] = await metrics_now(db)
    assert (m.latency_p50_ms, m.latency_p95_ms) == (50.0, 95.0)


async def test_each_cycle_stores_a_snapshot_and_prunes_the_old_ones(
    db: Database, tmp_path: Path
) -> None:
    service = EvolutionService(db, evolution_config(tmp_path))
    await seed_runs(db, 3, at=hours_ago(24 * 4))
    await seed_runs(db, 2, at=hours_ago(1))
    now = datetime.now(UTC)
    await service.run_cycle(now - timedelta(days=6))  # no runs in that window: no snapshot
    await service.run_cycle(now - timedelta(days=3))
    await service.run_cycle(now)
    assert [s["runs"] for s in await service.snapshots("main")] == [3, 5]
    # 5 days on, the window holds the 2 recent runs and the snapshot of 8 days before is gone.
    await service.run_cycle(now + timedelta(days=5))
    snapshots = await service.snapshots("main")
    assert [s["runs"] for s in snapshots] == [5, 2]
    assert snapshots[-1]["metrics"]["runs"] == 2 and snapshots[-1]["quality"] == 1.0


def test_arguments_digest_ignores_key_order_and_spacing() -> None:
    assert arguments_digest('{"a": 1, "b": [1, 2]}') == arguments_digest('{"b":[1,2],"a":1}')
    assert arguments_digest('{"a": 1}') != arguments_digest('{"a": 2}')
    assert arguments_digest("not json") == arguments_digest("not json")
    assert len(arguments_digest("")) == 16


async def test_a_real_run_records_repeats(app: Loopgate, dm: ChatDriver, llm: FakeLLM) -> None:
    llm.script(
        tool_calls(call("read_file", {"path": "notes.txt"})),
        tool_calls(call("read_file", {"path": "notes.txt"})),
        tool_calls(call("read_file", {"path": "other.txt"})),
        text("done"),
    )
    await dm.ask("read my notes")
    [m] = await app.evolution.metrics("main")
    assert m.runs == 1 and m.tools["read_file"].calls == 3
    assert (m.repeated_tool_calls, m.runs_with_repeats) == (1, 1)
    assert m.repeated_by_tool == {"read_file": 1}
