"""One evolution cycle, phase by phase (see :meth:`EvolutionService.run_cycle`).

Each agent is handled on its own: an error in one agent's rules or rollback is reported in
the cycle's ``errors`` (and logged) and the other agents still get their turn.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from bot.evolution.apply import view_agent
from bot.evolution.metrics import compute_metrics
from bot.evolution.records import AgentMetrics, CycleReport, Suggestion, SuggestionStatus
from bot.storage.models import utcnow

if TYPE_CHECKING:
    from bot.evolution.service import EvolutionService

log = structlog.get_logger(__name__)


class Cycle:
    def __init__(self, service: EvolutionService, now: datetime) -> None:
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
        # Judged before the rules run: a rolled-back change may be suggested again later,
        # and a change still on trial blocks new ones of its rule for its agent.
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

    async def _judge_applied(self) -> None:
        for suggestion in await self.service.store.list(SuggestionStatus.APPLIED):
            if not _on_trial(suggestion) or suggestion.applied_at is None:
                continue
            if suggestion.applied_at >= self.now:
                continue
            try:
                verdict = await self.service.judge(suggestion, self.now)
            except Exception as exc:
                log.exception("evolution.judge_failed", suggestion_id=suggestion.id)
                self.errors.append(f"{suggestion.id}: {type(exc).__name__}: {exc}")
                continue
            if verdict == "kept":
                self.kept.append(suggestion.id)
            elif verdict == "rolled_back":
                self.rolled_back.append(suggestion.id)

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
        on_trial = {
            s.rule
            for s in await service.store.list(SuggestionStatus.APPLIED, m.agent_id)
            if _on_trial(s)
        }
        memory_files = await service.memory_files(view)
        for rule in service.rules:
            if rule.name in on_trial:
                self.skipped.append(f"{m.agent_id}/{rule.name}: an applied change is on trial")
                continue
            for finding in rule.evaluate(m, view, memory_files):
                outcome = await service.consider(finding, m, view, self.now)
                if isinstance(outcome, str):
                    self.skipped.append(f"{m.agent_id}/{rule.name}: {outcome}")
                else:
                    self.created.append(outcome)


def _on_trial(suggestion: Suggestion) -> bool:
    """Applied and not judged yet (see ``EvolutionService.judge``)."""
    return suggestion.status is SuggestionStatus.APPLIED and not (
        suggestion.outcome or ""
    ).startswith("kept")
