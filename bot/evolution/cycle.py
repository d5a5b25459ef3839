"""One evolution cycle, phase by phase (see :meth:`EvolutionService.run_cycle`): metrics and
their snapshot, judging the applied suggestions on trial, then the rules.

Each agent is handled on its own: an error in one agent's rules or rollback is reported in
the cycle's ``errors`` (and logged) and the other agents still get their turn.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import structlog

from bot.evolution.apply import AgentView, revert_change, view_agent
from bot.evolution.guardrails import locked_by, within_cap
from bot.evolution.host import CycleHost
from bot.evolution.metrics import compute_metrics
from bot.evolution.records import (
    AgentMetrics,
    ChangeKind,
    CycleReport,
    Suggestion,
    SuggestionStatus,
    describe_change,
)
from bot.evolution.rules import Finding
from bot.evolution.store import fingerprint, history_event
from bot.storage.models import utcnow

log = structlog.get_logger(__name__)

JUDGE_MIN_RUNS = 20
"""Runs (not counting /stop-ped ones) an applied change needs after it was applied before its
quality is compared with the baseline; until then it stays on trial ("watching")."""

_ACTIVE = (SuggestionStatus.PENDING, SuggestionStatus.APPROVED, SuggestionStatus.APPLIED)
_CLOSED = (SuggestionStatus.REJECTED, SuggestionStatus.ROLLED_BACK, SuggestionStatus.FAILED)


class Cycle:
    def __init__(self, service: CycleHost, now: datetime) -> None:
        self.service = service
        self.now = now
        self.created: list[Suggestion] = []
        self.skipped: list[str] = []
        self.kept: list[str] = []
        self.rolled_back: list[str] = []
        self.errors: list[str] = []

    async def run(self) -> CycleReport:
        service, now = self.service, self.now
        start = now - service.window
        metrics = await compute_metrics(service.db, start, now)
        await service.store.save_snapshots(metrics, now)
        await service.store.prune_snapshots(start)
        # Judged before the rules run: a change still on trial blocks new suggestions of its
        # rule for its agent, a judged one no longer does.
        await self._judge_applied()
        for m in metrics:
            try:
                await self._suggest(m)
            except Exception as exc:
                log.exception("evolution.agent_failed", agent_id=m.agent_id)
                self.errors.append(f"{m.agent_id}: {type(exc).__name__}: {exc}")
        return CycleReport(
            started_at=now,
            finished_at=utcnow(),
            agents=tuple(m.agent_id for m in metrics),
            created=tuple(self.created),
            skipped=tuple(self.skipped),
            kept=tuple(self.kept),
            rolled_back=tuple(self.rolled_back),
            errors=tuple(self.errors),
        )

    # -- applied suggestions on trial -----------------------------------------------------------

    async def _judge_applied(self) -> None:
        for suggestion in await self.service.store.list(SuggestionStatus.APPLIED):
            if not on_trial(suggestion) or suggestion.applied_at is None:
                continue
            if suggestion.applied_at >= self.now:
                continue
            try:
                await self._judge(suggestion)
            except Exception as exc:
                log.exception("evolution.judge_failed", suggestion_id=suggestion.id)
                self.errors.append(f"{suggestion.id}: {type(exc).__name__}: {exc}")

    async def _judge(self, suggestion: Suggestion) -> None:
        """Quality since the change (runs after ``applied_at`` only, so the old runs in the
        window don't dilute a drop) against the baseline."""
        service = self.service
        assert suggestion.applied_at is not None and suggestion.baseline is not None
        since = await service.metrics_between(suggestion.agent_id, suggestion.applied_at, self.now)
        judged_runs = since.runs - since.cancellations
        if judged_runs < JUDGE_MIN_RUNS:
            outcome = f"watching: {judged_runs} of {JUDGE_MIN_RUNS} runs since applied"
            if outcome != suggestion.outcome:
                await service.move(suggestion, SuggestionStatus.APPLIED, outcome=outcome)
            return
        view = await view_agent(service.config, service.agents, suggestion.agent_id)
        base = float(suggestion.baseline.get("quality", 0.0))
        drop = (base - since.quality) / base * 100 if base > 0 else 0.0
        limit = view.guardrails.rollback_on_drop_pct
        figures = f"quality {since.quality:.2f} vs baseline {base:.2f}"
        if drop <= limit:
            await service.move(
                suggestion,
                SuggestionStatus.APPLIED,
                outcome=f"kept: {figures}",
                event=history_event("kept", None, figures),
            )
            log.info("evolution.kept", suggestion_id=suggestion.id, quality=since.quality)
            self.kept.append(suggestion.id)
            return
        assert suggestion.previous is not None
        await revert_change(service.agents, suggestion.agent_id, suggestion.previous)
        if service.router is not None:
            service.router.invalidate(suggestion.agent_id)
        outcome = f"rolled back: quality dropped {drop:.0f}% (> {limit:g}%): {figures}"
        await service.move(
            suggestion,
            SuggestionStatus.APPLIED,
            status=SuggestionStatus.ROLLED_BACK,
            outcome=outcome,
            event=history_event("rolled_back", None, outcome),
        )
        log.warning(
            "evolution.rolled_back",
            suggestion_id=suggestion.id,
            agent_id=suggestion.agent_id,
            drop_pct=round(drop, 1),
            limit_pct=limit,
            quality=round(since.quality, 4),
            baseline=base,
        )
        self.rolled_back.append(suggestion.id)

    # -- the rules ------------------------------------------------------------------------------

    async def _suggest(self, m: AgentMetrics) -> None:
        service = self.service
        view = await view_agent(service.config, service.agents, m.agent_id)
        if not view.known:
            self.skipped.append(f"{m.agent_id}: not a configured or stored agent")
            return
        minimum = view.guardrails.min_data_points
        if m.runs < minimum:
            self.skipped.append(f"{m.agent_id}: {m.runs} runs < min_data_points {minimum}")
            return
        trial = {
            s.rule
            for s in await service.store.list(SuggestionStatus.APPLIED, m.agent_id)
            if on_trial(s)
        }
        memory_files = await service.memory_files(view)
        for rule in service.rules:
            if rule.name in trial:
                self.skipped.append(f"{m.agent_id}/{rule.name}: an applied change is on trial")
                continue
            for finding in rule.evaluate(m, view, memory_files):
                outcome = await self._consider(finding, m, view)
                if isinstance(outcome, str):
                    self.skipped.append(f"{m.agent_id}/{rule.name}: {outcome}")
                else:
                    self.created.append(outcome)

    async def _consider(
        self, finding: Finding, m: AgentMetrics, view: AgentView
    ) -> Suggestion | str:
        """A new pending suggestion for the finding, or why none was made."""
        service, change = self.service, finding.change
        if (name := locked_by(change, view.guardrails)) is not None:
            return f"{name} is locked"
        if change["kind"] == ChangeKind.PARAM:
            if change["to"] == change["from"]:
                return f"max_delta_per_cycle allows no step from {change['from']}"
            if not within_cap(change, view.guardrails):
                return "delta above max_delta_per_cycle"
        same = fingerprint(view.agent_id, finding.rule, change)
        for earlier in await service.store.same_change(view.agent_id, same):
            if earlier.status in _ACTIVE:
                return f"the same change is already {earlier.status} ({earlier.id})"
            recent = (earlier.updated_at or earlier.created_at) > self.now - service.window
            if earlier.status in _CLOSED and recent:
                return f"the same change was {earlier.status} recently ({earlier.id})"
        suggestion = Suggestion(
            id=uuid.uuid4().hex[:12],
            agent_id=view.agent_id,
            rule=finding.rule,
            status=SuggestionStatus.PENDING,
            evidence={
                **finding.evidence,
                "runs": m.runs,
                "data_points": m.runs,
                "min_data_points": view.guardrails.min_data_points,
                "window_start": m.window_start.isoformat(),
                "window_end": m.window_end.isoformat(),
                "quality": round(m.quality, 4),
            },
            change=change,
            summary=finding.summary,
            created_at=self.now,
            decided_by=None,
            decided_at=None,
            applied_at=None,
            baseline=None,
            outcome=None,
            history=(history_event("suggested", None, describe_change(change)),),
            updated_at=self.now,
        )
        await service.store.add(suggestion)
        log.info(
            "evolution.suggested",
            suggestion_id=suggestion.id,
            agent_id=view.agent_id,
            rule=finding.rule,
            change=describe_change(change),
        )
        return suggestion


def on_trial(suggestion: Suggestion) -> bool:
    """Applied and not judged yet."""
    return suggestion.status is SuggestionStatus.APPLIED and not (
        suggestion.outcome or ""
    ).startswith("kept")
