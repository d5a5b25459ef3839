"""``bot/evolution/service.py``, the service the CLI, the dashboard and the schedule call.

Reviewing suggestions: approve applies the change (the router sees it at once) and records
the baseline; reject records who and why; the next cycle keeps a change or rolls it back after
a quality drop; the history says all of it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent_core import EventBus, MemoryStore
from bot.agents.router import AgentRouter
from bot.config import AgentConfig, Config
from bot.evolution.cycle import JUDGE_MIN_RUNS
from bot.evolution.records import Suggestion, SuggestionStatus
from bot.evolution.rules import MEMORY_REMINDER
from bot.evolution.service import EvolutionService
from bot.storage import Database, SqlAgentStore
from tests.evolution_support import (
    evolution_config,
    seed_failing_read_file,
    seed_memory_files,
    seed_runs,
)


def router_for(db: Database, config: Config) -> AgentRouter:
    memory = MemoryStore()
    return AgentRouter(
        config, store=memory, traces=memory, events=EventBus(), agent_store=SqlAgentStore(db)
    )


async def suggest(service: EvolutionService, rule: str) -> Suggestion:
    report = await service.run_cycle()
    [found] = [s for s in report.created if s.rule == rule]
    return found


class TestApprove:
    async def test_disabling_a_tool_reaches_the_router_at_once(
        self, db: Database, tmp_path: Path
    ) -> None:
        config = evolution_config(tmp_path)
        router = router_for(db, config)
        service = EvolutionService(db, config, router)
        await seed_failing_read_file(db)
        suggestion = await suggest(service, "ToolFailureRule")
        before = await router.resolve("main")
        assert "read_file" in before.tools

        applied = await service.approve(suggestion.id, "alice")

        after = await router.resolve("main")
        assert after is not before
        assert "read_file" not in after.tools
        assert "read_file" not in {spec.name for spec in after.tools.specs()}
        assert "disabled" in after.tools.hidden["read_file"]
        stored = await SqlAgentStore(db).get("main")
        assert stored is not None and stored.agent.disabled_tools == ["read_file"]
        assert applied.status is SuggestionStatus.APPLIED
        assert applied.decided_by == "alice" and applied.decided_at is not None
        assert applied.applied_at is not None
        assert applied.baseline is not None and applied.baseline["runs"] == 100
        assert applied.baseline["quality"] == pytest.approx(0.6)  # 1.0 × (1 − 40/100)
        assert [e["event"] for e in applied.history] == ["suggested", "approved", "applied"]
        assert await service.get(suggestion.id) == applied

    async def test_a_prompt_change_appends_to_the_effective_prompt(
        self, db: Database, tmp_path: Path
    ) -> None:
        config = evolution_config(tmp_path, main={"system_prompt": "You sell bikes."})
        router = router_for(db, config)
        service = EvolutionService(db, config, router)
        await seed_memory_files(db, tmp_path / "workspaces", 1)
        await seed_runs(db, 100)
        suggestion = await suggest(service, "LowRetrievalUsageRule")
        await service.approve(suggestion.id, "alice")
        loop = await router.resolve("main")
        assert loop.settings.system_prompt == f"You sell bikes.\n\n{MEMORY_REMINDER}"

    async def test_refused_when_not_pending_or_unknown(self, db: Database, tmp_path: Path) -> None:
        service = EvolutionService(db, evolution_config(tmp_path))
        await seed_failing_read_file(db)
        suggestion = await suggest(service, "ToolFailureRule")
        await service.approve(suggestion.id, "alice")
        with pytest.raises(ValueError, match=r"is applied, not pending.*alice"):
            await service.approve(suggestion.id, "bob")
        with pytest.raises(ValueError, match="no evolution suggestion 'nope'"):
            await service.approve("nope", "bob")

    async def test_a_param_locked_since_the_suggestion_is_never_changed(
        self, db: Database, tmp_path: Path
    ) -> None:
        await seed_runs(db, 20, status="max_iterations")
        await seed_runs(db, 80)
        suggestion = await suggest(
            EvolutionService(db, evolution_config(tmp_path)), "IterationLimitRule"
        )
        locked = evolution_config(
            tmp_path, main={"evolution_guardrails": {"locked_params": ["max_iterations"]}}
        )
        with pytest.raises(ValueError, match="'max_iterations' is locked for agent main"):
            await EvolutionService(db, locked).approve(suggestion.id, "alice")
        assert await SqlAgentStore(db).get("main") is None
        unchanged = await EvolutionService(db, locked).get(suggestion.id)
        assert unchanged is not None and unchanged.status is SuggestionStatus.PENDING

    async def test_a_stale_param_suggestion_is_refused(self, db: Database, tmp_path: Path) -> None:
        config = evolution_config(tmp_path)
        service = EvolutionService(db, config)
        await seed_runs(db, 20, status="max_iterations")
        await seed_runs(db, 80)
        suggestion = await suggest(service, "IterationLimitRule")
        await SqlAgentStore(db).upsert(AgentConfig(id="main", max_iterations=30))
        with pytest.raises(ValueError, match="max_iterations of main is 30 now"):
            await service.approve(suggestion.id, "alice")

    async def test_a_change_beyond_the_cap_is_refused(self, db: Database, tmp_path: Path) -> None:
        await seed_runs(db, 20, status="max_iterations")
        await seed_runs(db, 80)
        wide = evolution_config(
            tmp_path, main={"evolution_guardrails": {"max_delta_per_cycle": 0.5}}
        )
        suggestion = await suggest(EvolutionService(db, wide), "IterationLimitRule")
        assert suggestion.change["to"] == 30
        narrow = evolution_config(tmp_path)  # back to 0.1: 20 → 30 is too far now
        with pytest.raises(ValueError, match="more than max_delta_per_cycle"):
            await EvolutionService(db, narrow).approve(suggestion.id, "alice")


class TestReject:
    async def test_records_who_and_why(self, db: Database, tmp_path: Path) -> None:
        service = EvolutionService(db, evolution_config(tmp_path))
        await seed_failing_read_file(db)
        suggestion = await suggest(service, "ToolFailureRule")
        rejected = await service.reject(suggestion.id, "bob", "we need that tool")
        assert rejected.status is SuggestionStatus.REJECTED
        assert (rejected.decided_by, rejected.reason) == ("bob", "we need that tool")
        assert rejected.history[-1]["event"] == "rejected"
        assert rejected.history[-1]["detail"] == "we need that tool"
        assert await SqlAgentStore(db).get("main") is None  # nothing applied
        assert await service.list(SuggestionStatus.REJECTED) == [rejected]
        assert await service.list(SuggestionStatus.PENDING) == []
        with pytest.raises(ValueError, match="is rejected, not pending"):
            await service.approve(suggestion.id, "alice")


class TestRollback:
    async def applied(
        self, db: Database, tmp_path: Path, **agents: Any
    ) -> tuple[EvolutionService, Suggestion]:
        service = EvolutionService(db, evolution_config(tmp_path, **agents))
        await seed_runs(db, 10, status="max_iterations")
        await seed_runs(db, 90)  # quality 0.9
        suggestion = await suggest(service, "IterationLimitRule")
        return service, await service.approve(suggestion.id, "alice")

    async def test_a_quality_drop_rolls_the_change_back(self, db: Database, tmp_path: Path) -> None:
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        stored = await SqlAgentStore(db).get("main")
        assert stored is not None and stored.agent.max_iterations == 22
        later = applied.applied_at + timedelta(minutes=1)
        await seed_runs(db, 10, status="error", at=later)
        await seed_runs(db, 10, at=later)  # quality 0.5: a 44% drop from 0.9

        with capture_logs() as logs:
            report = await service.run_cycle(applied.applied_at + timedelta(hours=1))

        assert report.rolled_back == (applied.id,)
        done = await service.get(applied.id)
        assert done is not None and done.status is SuggestionStatus.ROLLED_BACK
        assert done.outcome == (
            "rolled back: quality dropped 44% (> 20%): quality 0.50 vs baseline 0.90"
        )
        assert done.history[-1]["event"] == "rolled_back"
        assert await SqlAgentStore(db).get("main") is None  # the row the change created
        [event] = [e for e in logs if e["event"] == "evolution.rolled_back"]
        assert event["suggestion_id"] == applied.id and event["drop_pct"] == pytest.approx(44.4)

    async def test_rollback_restores_the_stored_value_and_keeps_later_edits(
        self, db: Database, tmp_path: Path
    ) -> None:
        store = SqlAgentStore(db)
        await store.upsert(AgentConfig(id="main", max_iterations=20, model="m1"))
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        await store.upsert(AgentConfig(id="main", max_iterations=22, model="m2"))  # edited since
        await seed_runs(db, JUDGE_MIN_RUNS, status="error", at=applied.applied_at + timedelta(1))
        await service.run_cycle(applied.applied_at + timedelta(days=2))
        stored = await store.get("main")
        assert stored is not None
        assert (stored.agent.max_iterations, stored.agent.model) == (20, "m2")

    async def test_a_drop_within_the_limit_is_kept(self, db: Database, tmp_path: Path) -> None:
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        later = applied.applied_at + timedelta(minutes=1)
        await seed_runs(db, 3, status="error", at=later)
        await seed_runs(db, 17, at=later)  # quality 0.85: a 5.6% drop
        report = await service.run_cycle(applied.applied_at + timedelta(hours=1))
        assert report.kept == (applied.id,) and report.rolled_back == ()
        done = await service.get(applied.id)
        assert done is not None and done.status is SuggestionStatus.APPLIED
        assert done.outcome == "kept: quality 0.85 vs baseline 0.90"
        stored = await SqlAgentStore(db).get("main")
        assert stored is not None and stored.agent.max_iterations == 22
        # Judged once: a later drop is a new story for the rules, not a rollback.
        await seed_runs(db, 40, status="error", at=later)
        again = await service.run_cycle(applied.applied_at + timedelta(hours=2))
        assert again.rolled_back == ()

    async def test_the_per_agent_rollback_threshold_applies(
        self, db: Database, tmp_path: Path
    ) -> None:
        service, applied = await self.applied(
            db, tmp_path, main={"evolution_guardrails": {"rollback_on_drop_pct": 50}}
        )
        assert applied.applied_at is not None
        later = applied.applied_at + timedelta(minutes=1)
        await seed_runs(db, 10, status="error", at=later)
        await seed_runs(db, 10, at=later)  # 44% < 50%
        report = await service.run_cycle(applied.applied_at + timedelta(hours=1))
        assert report.kept == (applied.id,)

    async def test_too_few_runs_since_apply_keep_watching(
        self, db: Database, tmp_path: Path
    ) -> None:
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        await seed_runs(db, JUDGE_MIN_RUNS - 1, status="error", at=applied.applied_at)
        report = await service.run_cycle(applied.applied_at + timedelta(hours=1))
        assert report.rolled_back == () and report.kept == ()
        done = await service.get(applied.id)
        assert done is not None and done.status is SuggestionStatus.APPLIED
        assert (
            done.outcome == f"watching: {JUDGE_MIN_RUNS - 1} of {JUDGE_MIN_RUNS} runs since applied"
        )
        # While on trial its rule makes no new suggestion for the agent.
        assert any("IterationLimitRule: an applied change is on trial" in s for s in report.skipped)
