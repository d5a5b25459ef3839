"""One evolution cycle (``bot/evolution/cycle.py``) with rules of the test's own: which agents
get their turn, why a finding makes no suggestion, what a new suggestion records, an agent's
error kept to that agent, and which applied changes are still on trial."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.evolution.apply import AgentView
from bot.evolution.cycle import Cycle, on_trial
from bot.evolution.records import AgentMetrics, Suggestion, SuggestionStatus
from bot.evolution.rules import Finding
from bot.evolution.service import EvolutionService
from bot.evolution.store import fingerprint
from bot.storage import Database
from bot.storage.models import utcnow
from tests.evolution_support import evolution_config, seed_runs

FEW = {"defaults": {"evolution_guardrails": {"min_data_points": 5}}}


@dataclass
class FixedRule:
    """Finds the same changes for every agent; raises for the agents in ``fail_for``."""

    changes: list[dict[str, Any]]
    name: str = "FixedRule"
    fail_for: set[str] = field(default_factory=set)
    seen: list[tuple[str, int]] = field(default_factory=list)

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        self.seen.append((m.agent_id, m.runs))
        if m.agent_id in self.fail_for:
            raise RuntimeError(f"boom for {m.agent_id}")
        return [
            Finding(self.name, change, f"change {i}", {"why": "test"})
            for i, change in enumerate(self.changes)
        ]


def param(frm: int, to: int, name: str = "max_iterations") -> dict[str, Any]:
    return {"kind": "param", "param": name, "from": frm, "to": to}


def service_with(db: Database, tmp_path: Path, rule: FixedRule, **agents: Any) -> EvolutionService:
    return EvolutionService(db, evolution_config(tmp_path, **{**FEW, **agents}), rules=(rule,))


class TestWhoGetsATurn:
    async def test_unknown_agents_and_too_few_runs_are_skipped(
        self, db: Database, tmp_path: Path
    ) -> None:
        rule = FixedRule([param(20, 22)])
        service = service_with(db, tmp_path, rule, list=[{"id": "quiet"}])
        await seed_runs(db, 6, agent_id="main")
        await seed_runs(db, 4, agent_id="quiet")
        await seed_runs(db, 9, agent_id="ghost")  # in the traces, in no definition
        report = await Cycle(service, utcnow()).run()
        assert sorted(report.agents) == ["ghost", "main", "quiet"]
        assert sorted(report.skipped) == [
            "ghost: not a configured or stored agent",
            "quiet: 4 runs < min_data_points 5",
        ]
        assert rule.seen == [("main", 6)]
        assert [s.agent_id for s in report.created] == ["main"]

    async def test_an_error_stays_with_its_agent(self, db: Database, tmp_path: Path) -> None:
        rule = FixedRule([param(20, 22)], fail_for={"main"})
        service = service_with(db, tmp_path, rule, list=[{"id": "main"}, {"id": "helper"}])
        await seed_runs(db, 6, agent_id="main")
        await seed_runs(db, 6, agent_id="helper")
        report = await Cycle(service, utcnow()).run()
        assert report.errors == ("main: RuntimeError: boom for main",)
        assert [s.agent_id for s in report.created] == ["helper"]


class TestFindings:
    async def test_a_new_suggestion_records_its_evidence_and_history(
        self, db: Database, tmp_path: Path
    ) -> None:
        service = service_with(db, tmp_path, FixedRule([param(20, 22)]))
        await seed_runs(db, 6)
        now = utcnow()
        [made] = (await Cycle(service, now).run()).created
        assert (made.status, made.rule, made.summary) == (
            SuggestionStatus.PENDING, "FixedRule", "change 0"
        )  # fmt: skip
        assert made.created_at == now and made.updated_at == now
        assert made.evidence["why"] == "test"
        assert (made.evidence["runs"], made.evidence["min_data_points"]) == (6, 5)
        assert made.evidence["window_end"] == now.isoformat()
        assert made.evidence["window_start"] == (now - service.window).isoformat()
        [event] = made.history
        assert (event["event"], event["detail"]) == ("suggested", "max_iterations 20 → 22")
        assert await service.store.get(made.id) is not None

    async def test_guardrails_say_why_no_suggestion_was_made(
        self, db: Database, tmp_path: Path
    ) -> None:
        rule = FixedRule(
            [
                param(20, 22, "history_limit"),  # locked below
                param(5, 5),  # the cap allows no step from 5
                param(20, 30),  # 50% > max_delta_per_cycle 10%
            ]
        )
        guardrails = {"min_data_points": 5, "locked_params": ["history_limit"]}
        service = service_with(db, tmp_path, rule, defaults={"evolution_guardrails": guardrails})
        await seed_runs(db, 6)
        report = await Cycle(service, utcnow()).run()
        assert report.created == ()
        assert list(report.skipped) == [
            "main/FixedRule: history_limit is locked",
            "main/FixedRule: max_delta_per_cycle allows no step from 5",
            "main/FixedRule: delta above max_delta_per_cycle",
        ]

    async def test_the_same_change_is_not_suggested_again_while_recent(
        self, db: Database, tmp_path: Path
    ) -> None:
        change = param(20, 22)
        service = service_with(db, tmp_path, FixedRule([change]))
        await seed_runs(db, 6)
        now = utcnow()
        [first] = (await Cycle(service, now).run()).created
        again = await Cycle(service, now).run()
        assert again.created == ()
        assert again.skipped == (
            f"main/FixedRule: the same change is already pending ({first.id})",
        )

        rejected = await service.reject(first.id, "carol", "no")
        later = await Cycle(service, now + timedelta(days=1)).run()
        assert later.skipped == (
            f"main/FixedRule: the same change was rejected recently ({rejected.id})",
        )
        # Once the rejection is older than the window, the rule may ask again.
        much_later = now + service.window + timedelta(days=1)
        await seed_runs(db, 6, at=much_later - timedelta(hours=1))
        [renewed] = (await Cycle(service, much_later).run()).created
        assert renewed.id != first.id
        assert renewed.change == change
        prints = await service.store.same_change("main", fingerprint("main", "FixedRule", change))
        assert [s.id for s in prints] == [renewed.id, first.id]


def suggestion(status: SuggestionStatus, outcome: str | None) -> Suggestion:
    return Suggestion(
        id="s1", agent_id="main", rule="R", status=status, evidence={}, change=param(20, 22),
        summary="", created_at=utcnow(), decided_by=None, decided_at=None, applied_at=None,
        baseline=None, outcome=outcome,
    )  # fmt: skip


def test_on_trial_until_kept() -> None:
    applied = SuggestionStatus.APPLIED
    assert on_trial(suggestion(applied, None))
    assert on_trial(suggestion(applied, "watching: 3 of 20 runs since applied"))
    assert not on_trial(suggestion(applied, "kept: quality 0.93 vs baseline 0.95"))
    assert not on_trial(suggestion(SuggestionStatus.PENDING, None))
    assert not on_trial(suggestion(SuggestionStatus.ROLLED_BACK, "rolled back: ..."))


class Router:
    def __init__(self) -> None:
        self.invalidated: list[str | None] = []

    def invalidate(self, agent_id: str | None = None) -> None:
        self.invalidated.append(agent_id)


class TestJudging:
    async def applied(
        self, db: Database, tmp_path: Path, router: Router | None = None
    ) -> tuple[EvolutionService, Suggestion]:
        rule = FixedRule([param(20, 22)])
        service = service_with(db, tmp_path, rule)
        service.router = router  # type: ignore[assignment]  # only invalidate() is used
        await seed_runs(db, 6)
        [made] = (await Cycle(service, utcnow()).run()).created
        return service, await service.approve(made.id, "alice")

    async def test_a_rollback_rebuilds_the_agent(self, db: Database, tmp_path: Path) -> None:
        router = Router()
        service, applied = await self.applied(db, tmp_path, router)
        assert applied.applied_at is not None
        router.invalidated.clear()
        await seed_runs(db, 25, status="error", at=applied.applied_at + timedelta(minutes=1))
        report = await Cycle(service, applied.applied_at + timedelta(hours=1)).run()
        assert report.rolled_back == (applied.id,)
        assert router.invalidated == ["main"]

    async def test_a_change_applied_after_the_cycle_began_is_not_judged(
        self, db: Database, tmp_path: Path
    ) -> None:
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        report = await Cycle(service, applied.applied_at - timedelta(seconds=1)).run()
        assert report.kept == () and report.rolled_back == ()
        unchanged = await service.get(applied.id)
        assert unchanged is not None and unchanged.outcome == applied.outcome
        assert unchanged.history == applied.history

    async def test_watching_is_written_once_per_count(self, db: Database, tmp_path: Path) -> None:
        service, applied = await self.applied(db, tmp_path)
        assert applied.applied_at is not None
        await seed_runs(db, 3, at=applied.applied_at + timedelta(minutes=1))
        when = applied.applied_at + timedelta(hours=1)
        await Cycle(service, when).run()
        first = await service.get(applied.id)
        assert first is not None and first.outcome == "watching: 3 of 20 runs since applied"
        await Cycle(service, when).run()
        second = await service.get(applied.id)
        assert second is not None and second.updated_at == first.updated_at
        assert replace(second, updated_at=None) == replace(first, updated_at=None)
