"""The bot's :class:`agent_core.UsageMeter`: prices each model call, adds it up, checks limits.

Every call's accounting goes through one method, :meth:`Meter.account` (agent, channel, user,
provider, model, tokens and cost): it adds the call to the hourly rollup, and it is where other
sinks of per-call usage (metrics) hook in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from agent_core import Charge, LlmCall, Reservation, RunRequest, Usage, UsageLimitReached
from bot.config import Config
from bot.storage.usage import SqlUsage, UsageKey, UsageTotals, hour_of
from bot.usage.counters import BudgetCounters, LocalCounters
from bot.usage.limits import Scope, scopes_of
from bot.usage.pricing import PriceBook

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One model call as it is accounted."""

    agent_id: str
    channel: str
    user_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost_usd: float | None
    """None: the model's price is unknown."""
    new_run: bool = False
    """The run's first charged call: the run is counted with it."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


CallSink = Callable[[CallUsage], None]


@dataclass(frozen=True, slots=True)
class _Hold:
    """A reservation's share of the counters."""

    scopes: list[Scope]
    tokens: int
    usd: float


class Meter:
    def __init__(
        self,
        config: Config,
        store: SqlUsage,
        *,
        prices: PriceBook | None = None,
        counters: BudgetCounters | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``counters``: shared ones with several processes; default: this process's."""
        self.config = config
        self.store = store
        self.prices = prices or PriceBook(config.providers.all())
        self.counters = counters or LocalCounters(self.seed)
        self.sinks: list[CallSink] = []
        """Called with every accounted call, after the rollup (e.g. metrics); must not block."""
        self._clock = clock

    # -- agent_core.UsageMeter ----------------------------------------------------------------

    def needs_estimate(self, request: RunRequest) -> bool:
        return bool(scopes_of(self.config, request, self._clock()))

    async def reserve(self, call: LlmCall) -> Reservation:
        now = self._clock()
        scopes = scopes_of(self.config, call.request, now)
        if not scopes:
            return Reservation(call)
        tokens = call.estimated_tokens
        usd = 0.0
        if any(scope.usd_limit for scope in scopes):
            price = await self.prices.price(call.provider, call.model)
            if price is not None:
                usd = price.cost(Usage(call.input_tokens, call.max_output_tokens))
        try:
            refusal = await self.counters.admit(scopes, tokens, usd)
        except Exception as exc:  # the rollup could not be read: let the call go, say so
            log.warning("usage.check_failed", error=repr(exc), run_id=call.request.run_id)
            return Reservation(call)
        if refusal is not None:
            scope, unit = refusal.scope, refusal.unit
            raise UsageLimitReached(scope.reason(unit), scope.notice(unit, now), scope.resets_at)
        return Reservation(call, held=_Hold(scopes, tokens, usd))

    async def settle(self, reservation: Reservation, usage: Usage | None) -> Charge:
        call = reservation.call
        charge = Charge()
        used = (0, 0.0)
        if usage is not None:
            found, price = self.prices.cached(call.provider, call.model)
            if not found:
                price = await self.prices.price(call.provider, call.model)
            cost = price.cost(usage) if price is not None else None
            charge = Charge(cost, price.source if price is not None else None)
            request = call.request
            self.account(
                CallUsage(
                    request.agent_id,
                    request.channel,
                    request.user_id,
                    call.provider,
                    call.model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cached_input_tokens,
                    cost,
                    new_run=call.first_of_run,
                    at=self._clock(),
                )
            )
            used = (usage.total_tokens, cost or 0.0)
        hold = reservation.held
        if isinstance(hold, _Hold):
            await self.counters.settle(hold.scopes, (hold.tokens, hold.usd), used)
        return charge

    async def price_note(self, provider: str, model: str) -> str:
        price = await self.prices.price(provider, model)
        return price.note() if price is not None else ""

    # -- accounting ----------------------------------------------------------------------------

    def account(self, call: CallUsage) -> None:
        """The one place a model call is accounted: the hourly rollup, then the sinks."""
        key = UsageKey(
            hour_of(call.at), call.agent_id, call.channel, call.user_id, call.provider, call.model
        )
        self.store.add(
            key,
            UsageTotals.of_call(
                call.input_tokens,
                call.output_tokens,
                call.cached_input_tokens,
                call.cost_usd,
                call.new_run,
            ),
        )
        for sink in self.sinks:
            sink(call)

    async def seed(self, scope: Scope) -> tuple[int, float]:
        """What the rollup holds for ``scope``'s period so far (a counter's start)."""
        totals = await self.store.total(
            since=scope.since, until=scope.resets_at, agent_id=scope.agent_id, user_id=scope.user_id
        )
        return totals.tokens, totals.cost_usd or 0.0
