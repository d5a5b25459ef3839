"""The suggestion rules and the guardrails, on seeded metrics (SQLite, and Postgres when
LOOPGATE_TEST_POSTGRES_URL is set): each rule fires at its threshold and stays quiet just
below it; min_data_points, locked_params and max_delta_per_cycle hold; nothing is suggested
twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.evolution.records import CycleReport, Suggestion, SuggestionStatus
from bot.evolution.rules import (
    MEMORY_REMINDER,
    REPEAT_ADVICE,
    TOOL_FAILURE_MIN_CALLS,
)
from bot.evolution.service import EvolutionService
from bot.storage import Database
from tests.evolution_support import Call, evolution_config, seed_memory_files, seed_runs


async def cycle(
    db: Database, tmp_path: Path, **agents: Any
) -> tuple[CycleReport, EvolutionService]:
    service = EvolutionService(db, evolution_config(tmp_path, **agents))
    return await service.run_cycle(), service


def by_rule(report: CycleReport, rule: str) -> list[Suggestion]:
    return [s for s in report.created if s.rule == rule]


async def seed_tool_failures(db: Database, calls: int, errors: int, runs: int = 100) -> None:
    """``runs`` runs; ``calls`` of them call web_fetch once, ``errors`` of those fail."""
    await seed_runs(db, errors, calls=[Call("web_fetch", error=True, args='{"u": 1}')])
    await seed_runs(db, calls - errors, calls=[Call("web_fetch", args='{"u": 2}')])
    await seed_runs(db, runs - calls)


class TestToolFailureRule:
    async def test_fires_at_30_percent(self, db: Database, tmp_path: Path) -> None:
        await seed_tool_failures(db, calls=30, errors=9)
        report, _ = await cycle(db, tmp_path)
        [s] = by_rule(report, "ToolFailureRule")
        assert s.change == {"kind": "tool_policy", "disable": ["web_fetch"]}
        assert s.status is SuggestionStatus.PENDING
        assert s.evidence["error_rate"] == pytest.approx(0.3)
        assert s.evidence["calls"] == 30 and s.evidence["data_points"] == 100
        assert "web_fetch" in s.summary

    async def test_quiet_below_the_rate(self, db: Database, tmp_path: Path) -> None:
        await seed_tool_failures(db, calls=30, errors=8)  # 26.7%
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "ToolFailureRule") == []

    async def test_quiet_with_too_few_calls(self, db: Database, tmp_path: Path) -> None:
        n = TOOL_FAILURE_MIN_CALLS - 1
        await seed_tool_failures(db, calls=n, errors=n)  # every call fails, but only 19
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "ToolFailureRule") == []

    async def test_locked_tool_policy_is_never_suggested(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_tool_failures(db, calls=40, errors=40)
        report, service = await cycle(
            db, tmp_path, main={"evolution_guardrails": {"locked_params": ["disabled_tools"]}}
        )
        assert report.created == ()
        assert any("disabled_tools is locked" in line for line in report.skipped)
        assert await service.list() == []


class TestMinDataPoints:
    async def test_no_suggestion_below_min_data_points(self, db: Database, tmp_path: Path) -> None:
        await seed_tool_failures(db, calls=40, errors=40, runs=99)
        report, service = await cycle(db, tmp_path)
        assert report.created == ()
        assert report.skipped == ("main: 99 runs < min_data_points 100",)
        assert await service.list() == []

    async def test_exactly_min_data_points_is_enough(self, db: Database, tmp_path: Path) -> None:
        await seed_tool_failures(db, calls=40, errors=40, runs=100)
        report, _ = await cycle(db, tmp_path)
        assert len(by_rule(report, "ToolFailureRule")) == 1

    async def test_per_agent_guardrails_override_the_defaults(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_tool_failures(db, calls=40, errors=40, runs=60)
        report, _ = await cycle(
            db,
            tmp_path,
            defaults={"evolution_guardrails": {"min_data_points": 500}},
            main={"evolution_guardrails": {"min_data_points": 50}},
        )
        assert len(by_rule(report, "ToolFailureRule")) == 1

    async def test_runs_outside_the_window_do_not_count(self, db: Database, tmp_path: Path) -> None:
        from tests.evolution_support import hours_ago

        await seed_tool_failures(db, calls=40, errors=40, runs=60)
        await seed_runs(db, 60, at=hours_ago(24 * 8))  # older than the 7-day window
        report, _ = await cycle(db, tmp_path)
        assert report.created == ()
        assert report.skipped == ("main: 60 runs < min_data_points 100",)


class TestLowRetrievalUsageRule:
    async def test_fires_when_memory_exists_but_is_not_searched(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_memory_files(db, tmp_path / "workspaces", 3)
        await seed_runs(db, 4, calls=[Call("memory_search", args='{"query": "x"}')])
        await seed_runs(db, 96)
        report, _ = await cycle(db, tmp_path)
        [s] = by_rule(report, "LowRetrievalUsageRule")
        assert s.change == {"kind": "prompt", "target": "system_prompt", "append": MEMORY_REMINDER}
        assert s.evidence["memory_search_per_run"] == pytest.approx(0.04)
        assert s.evidence["memory_files"] == 3

    async def test_quiet_at_the_threshold(self, db: Database, tmp_path: Path) -> None:
        await seed_memory_files(db, tmp_path / "workspaces", 3)
        await seed_runs(db, 5, calls=[Call("memory_search", args='{"query": "x"}')])
        await seed_runs(db, 95)  # 0.05 per run
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "LowRetrievalUsageRule") == []

    async def test_quiet_without_memory_files(self, db: Database, tmp_path: Path) -> None:
        await seed_memory_files(db, tmp_path / "elsewhere", 3)  # another workspace base
        await seed_runs(db, 100)
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "LowRetrievalUsageRule") == []

    async def test_locked_system_prompt(self, db: Database, tmp_path: Path) -> None:
        await seed_memory_files(db, tmp_path / "workspaces", 1)
        await seed_runs(db, 100)
        report, _ = await cycle(
            db, tmp_path, defaults={"evolution_guardrails": {"locked_params": ["system_prompt"]}}
        )
        assert report.created == ()


class TestRepeatedToolRule:
    async def test_fires_on_identical_calls_in_10_percent_of_runs(
        self, db: Database, tmp_path: Path
    ) -> None:
        # Same arguments in another key order and spacing: still the same call.
        same = [
            Call("read_file", args='{"path": "a", "n": 1}'),
            Call("read_file", args='{"n":1,"path":"a"}'),
        ]
        await seed_runs(db, 10, calls=same)
        await seed_runs(db, 90)
        report, _ = await cycle(db, tmp_path)
        [s] = by_rule(report, "RepeatedToolRule")
        assert s.change == {"kind": "prompt", "target": "system_prompt", "append": REPEAT_ADVICE}
        assert s.evidence["repeated_tool_calls"] == 10
        assert s.evidence["runs_with_repeats"] == 10
        assert s.evidence["by_tool"] == {"read_file": 10}

    async def test_quiet_below_the_share(self, db: Database, tmp_path: Path) -> None:
        # 9 runs with repeats (9%), though with more repeated calls than the minimum.
        triple = [Call("read_file", args='{"path": "a"}')] * 3
        await seed_runs(db, 9, calls=triple)
        await seed_runs(db, 91)
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "RepeatedToolRule") == []

    async def test_different_arguments_are_no_repeat(self, db: Database, tmp_path: Path) -> None:
        calls = [Call("read_file", args='{"path": "a"}'), Call("read_file", args='{"path": "b"}')]
        await seed_runs(db, 100, calls=calls)
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "RepeatedToolRule") == []


class TestParamDelta:
    async def test_iteration_limit_raise_is_capped_at_max_delta(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_runs(db, 10, status="max_iterations")
        await seed_runs(db, 90)
        report, _ = await cycle(db, tmp_path)
        [s] = by_rule(report, "IterationLimitRule")
        # The rule wants 20 × 1.5 = 30; max_delta_per_cycle 0.1 allows 10% of 20.
        assert s.change == {"kind": "param", "param": "max_iterations", "from": 20, "to": 22}
        assert s.evidence["wanted"] == 30

    async def test_a_larger_max_delta_allows_more(self, db: Database, tmp_path: Path) -> None:
        await seed_runs(db, 10, status="max_iterations")
        await seed_runs(db, 90)
        report, _ = await cycle(
            db,
            tmp_path,
            main={"max_iterations": 40, "evolution_guardrails": {"max_delta_per_cycle": 0.25}},
        )
        [s] = by_rule(report, "IterationLimitRule")
        assert (s.change["from"], s.change["to"]) == (40, 50)

    async def test_no_suggestion_when_the_cap_allows_no_step(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_runs(db, 10, status="max_iterations")
        await seed_runs(db, 90)
        report, _ = await cycle(db, tmp_path, main={"max_iterations": 5})  # 10% of 5 < 1
        assert by_rule(report, "IterationLimitRule") == []
        assert any("allows no step" in line for line in report.skipped)

    async def test_below_the_capped_share_is_quiet(self, db: Database, tmp_path: Path) -> None:
        await seed_runs(db, 9, status="max_iterations")
        await seed_runs(db, 91)
        report, _ = await cycle(db, tmp_path)
        assert by_rule(report, "IterationLimitRule") == []

    async def test_locked_param_is_never_suggested(self, db: Database, tmp_path: Path) -> None:
        await seed_runs(db, 50, status="max_iterations")
        await seed_runs(db, 50)
        report, service = await cycle(
            db, tmp_path, main={"evolution_guardrails": {"locked_params": ["max_iterations"]}}
        )
        assert report.created == ()
        assert any("max_iterations is locked" in line for line in report.skipped)
        assert await service.list() == []


class TestDuplicates:
    async def test_the_same_pending_change_is_not_suggested_twice(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_tool_failures(db, calls=40, errors=40)
        first, service = await cycle(db, tmp_path)
        second = await service.run_cycle()
        assert len(first.created) == 1 and second.created == ()
        assert any("already pending" in line for line in second.skipped)
        assert len(await service.list(SuggestionStatus.PENDING)) == 1

    async def test_a_rejected_change_is_not_suggested_again_within_the_window(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_tool_failures(db, calls=40, errors=40)
        first, service = await cycle(db, tmp_path)
        await service.reject(first.created[0].id, "admin", "we need that tool")
        again = await service.run_cycle()
        assert again.created == ()
        assert any("rejected recently" in line for line in again.skipped)

    async def test_each_agent_gets_its_own(self, db: Database, tmp_path: Path) -> None:
        for agent in ("main", "support"):
            await seed_runs(db, 40, agent_id=agent, calls=[Call("web_fetch", error=True)])
            await seed_runs(db, 60, agent_id=agent)
        report, _ = await cycle(db, tmp_path, support={"model": "m"})
        assert sorted(s.agent_id for s in report.created) == ["main", "support"]

    async def test_unknown_agents_get_no_suggestion(self, db: Database, tmp_path: Path) -> None:
        await seed_runs(db, 100, agent_id="gone", calls=[Call("web_fetch", error=True)])
        report, _ = await cycle(db, tmp_path)
        assert report.created == ()
        assert report.skipped == ("gone: not a configured or stored agent",)
