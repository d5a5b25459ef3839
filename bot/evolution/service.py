"""The evolution service: review (list, approve, reject), the cycle, and its schedule.

A cycle: compute every agent's metrics over ``evolution.window`` and store them as snapshots
(older ones are pruned: the table is the rolling window); judge the applied suggestions still
on trial (quality since the change vs the baseline: a drop above ``rollback_on_drop_pct``
rolls the change back); then run the rules and store what they find as pending suggestions,
within each agent's guardrails.

Approving applies at once (no separate worker process: the change is one database write) and
records the baseline; the router given to the service drops its cached agent so the next
message sees the change. A server without that router (``loopgate evolution approve`` run
beside it) sees it within ``agents.cache_ttl``.
"""

from __future__ import annotations

import asyncio
import builtins
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import structlog

from bot.config import Config
from bot.evolution.records import (
    AgentMetrics,
    ChangeKind,
    CycleReport,
    Suggestion,
    SuggestionStatus,
    describe_change,
)
from bot.evolution.schedule import CycleScheduler
from bot.evolution.store import SuggestionStore, history_event
from bot.storage import Database, SqlAgentStore
from bot.storage.models import utcnow

# The cycle's modules (metrics, rules, changes, guardrails) load with the first cycle or
# review: a server starts the schedule, whose first cycle is hours away (docs/performance.md).
if TYPE_CHECKING:
    from bot.agents.router import AgentRouter
    from bot.evolution.apply import AgentView
    from bot.evolution.rules import Rule

log = structlog.get_logger(__name__)


class EvolutionService:
    def __init__(
        self,
        db: Database,
        config: Config,
        router: AgentRouter | None = None,
        *,
        rules: tuple[Rule, ...] | None = None,
    ) -> None:
        self.db = db
        self.config = config
        self.router = router
        self._rules = rules
        self.store = SuggestionStore(db)
        self.agents = SqlAgentStore(db)
        self.scheduler: CycleScheduler | None = None
        # One decision or cycle at a time in this process; other processes are kept out by
        # the store's compare-and-set.
        self._lock = asyncio.Lock()

    @property
    def rules(self) -> tuple[Rule, ...]:
        if self._rules is None:
            from bot.evolution.rules import RULES

            self._rules = tuple(RULES)
        return self._rules

    @property
    def window(self) -> timedelta:
        return timedelta(seconds=self.config.evolution.window)

    # -- schedule --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the schedule (``evolution.enabled``); call from a running event loop."""
        if not self.config.evolution.enabled or self.scheduler is not None:
            return
        self.scheduler = CycleScheduler(self.config.evolution.schedule, self.run_cycle)
        self.scheduler.start()

    async def aclose(self) -> None:
        scheduler, self.scheduler = self.scheduler, None
        if scheduler is not None:
            await scheduler.aclose()

    # -- review ----------------------------------------------------------------------------------

    async def list(
        self, status: SuggestionStatus | None = None, agent_id: str | None = None
    ) -> builtins.list[Suggestion]:
        """Suggestions, newest first."""
        return await self.store.list(status, agent_id)

    async def get(self, suggestion_id: str) -> Suggestion | None:
        return await self.store.get(suggestion_id)

    async def metrics(self, agent_id: str | None = None) -> builtins.list[AgentMetrics]:
        """Every agent's metrics over the window ending now (or one agent's)."""
        from bot.evolution.metrics import compute_metrics

        now = utcnow()
        return await compute_metrics(self.db, now - self.window, now, agent_id)

    async def snapshots(self, agent_id: str | None = None) -> builtins.list[dict[str, object]]:
        """The stored metric snapshots (one per agent and cycle), oldest first."""
        return await self.store.snapshots(agent_id)

    async def approve(self, suggestion_id: str, by: str) -> Suggestion:
        """Apply the suggestion now and record the baseline. Raises ValueError (with a message
        for the admin) when it is unknown, not pending, locked or stale. A change that fails
        to apply is returned with status ``failed`` and the error in ``outcome``."""
        from bot.evolution.apply import view_agent

        async with self._lock:
            suggestion = await self._pending(suggestion_id)
            view = await view_agent(self.config, self.agents, suggestion.agent_id)
            self._check_allowed(suggestion, view)
            approved = await self.move(
                suggestion,
                SuggestionStatus.PENDING,
                status=SuggestionStatus.APPROVED,
                decided_by=by,
                decided_at=utcnow(),
                event=history_event("approved", by),
            )
            return await self._apply(approved, view)

    async def reject(self, suggestion_id: str, by: str, reason: str = "") -> Suggestion:
        async with self._lock:
            suggestion = await self._pending(suggestion_id)
            rejected = await self.move(
                suggestion,
                SuggestionStatus.PENDING,
                status=SuggestionStatus.REJECTED,
                decided_by=by,
                decided_at=utcnow(),
                reason=reason,
                outcome="rejected" + (f": {reason}" if reason else ""),
                event=history_event("rejected", by, reason),
            )
        log.info("evolution.rejected", suggestion_id=suggestion_id, agent_id=rejected.agent_id)
        return rejected

    async def _pending(self, suggestion_id: str) -> Suggestion:
        suggestion = await self.store.get(suggestion_id)
        if suggestion is None:
            raise ValueError(f"no evolution suggestion {suggestion_id!r}")
        if suggestion.status is not SuggestionStatus.PENDING:
            raise ValueError(
                f"suggestion {suggestion_id} is {suggestion.status}, not pending"
                + (f" (decided by {suggestion.decided_by})" if suggestion.decided_by else "")
            )
        return suggestion

    def _check_allowed(self, suggestion: Suggestion, view: AgentView) -> None:
        """The guardrails again at approval: they may have changed since the suggestion."""
        from bot.evolution.guardrails import locked_by, within_cap

        change = suggestion.change
        if (name := locked_by(change, view.guardrails)) is not None:
            raise ValueError(
                f"{name!r} is locked for agent {view.agent_id} "
                f"(evolution_guardrails.locked_params): suggestion {suggestion.id} can't apply"
            )
        if change["kind"] == ChangeKind.PARAM:
            current = view.params.get(change["param"])
            if current != change["from"]:
                raise ValueError(
                    f"{change['param']} of {view.agent_id} is {current} now, the suggestion was "
                    f"made for {change['from']}: reject it, the next cycle suggests anew"
                )
            if not within_cap(change, view.guardrails):
                raise ValueError(
                    f"{describe_change(change)} is more than max_delta_per_cycle "
                    f"({view.guardrails.max_delta_per_cycle:g}) allows for {view.agent_id}"
                )

    async def move(
        self, suggestion: Suggestion, expected: SuggestionStatus, **changes: object
    ) -> Suggestion:
        moved = await self.store.transition(suggestion, expected, **changes)
        if moved is None:
            raise ValueError(f"suggestion {suggestion.id} was changed meanwhile; look again")
        return moved

    async def _apply(self, suggestion: Suggestion, view: AgentView) -> Suggestion:
        from bot.evolution.apply import apply_change

        now, change = utcnow(), suggestion.change
        baseline = await self.metrics_between(view.agent_id, now - self.window, now)
        try:
            previous = await apply_change(self.agents, view, suggestion.change)
        except Exception as exc:
            log.warning("evolution.apply_failed", suggestion_id=suggestion.id, error=str(exc))
            return await self.move(
                suggestion,
                SuggestionStatus.APPROVED,
                status=SuggestionStatus.FAILED,
                outcome=f"apply failed: {exc}",
                event=history_event("failed", None, str(exc)),
            )
        if self.router is not None:
            self.router.invalidate(view.agent_id)
        applied = await self.move(
            suggestion,
            SuggestionStatus.APPROVED,
            status=SuggestionStatus.APPLIED,
            applied_at=now,
            baseline=baseline.as_dict(),
            previous=previous,
            outcome=f"watching: quality baseline {baseline.quality:.2f}",
            event=history_event("applied", suggestion.decided_by, describe_change(change)),
        )
        log.info(
            "evolution.applied",
            suggestion_id=suggestion.id,
            agent_id=view.agent_id,
            rule=suggestion.rule,
            change=describe_change(suggestion.change),
            by=suggestion.decided_by,
            baseline_quality=round(baseline.quality, 4),
        )
        return applied

    async def metrics_between(self, agent_id: str, start: datetime, end: datetime) -> AgentMetrics:
        from bot.evolution.metrics import compute_metrics

        found = await compute_metrics(self.db, start, end, agent_id)
        return found[0] if found else AgentMetrics(agent_id, start, end)

    # -- the cycle -------------------------------------------------------------------------------

    async def run_cycle(self, now: datetime | None = None) -> CycleReport:
        """Metrics → rollback checks of applied suggestions → rules → new pending suggestions."""
        async with self._lock:
            return await self._cycle(now or utcnow())

    async def _cycle(self, now: datetime) -> CycleReport:
        from bot.evolution.cycle import Cycle

        report = await Cycle(self, now).run()
        log.info(
            "evolution.cycle",
            agents=len(report.agents),
            created=len(report.created),
            kept=len(report.kept),
            rolled_back=len(report.rolled_back),
            skipped=len(report.skipped),
            errors=len(report.errors),
        )
        return report

    async def memory_files(self, view: AgentView) -> int:
        from bot.evolution.metrics import memory_file_count

        return await memory_file_count(self.db, view.workspace)
