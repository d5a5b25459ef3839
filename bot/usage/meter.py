"""The bot's :class:`agent_core.UsageMeter`: prices each model call, adds it up, checks limits.

Every call's accounting goes through one method, :meth:`Meter.account` (agent, channel, user,
provider, model, tokens and cost): it adds the call to the hourly rollup, and it is where other
sinks of per-call usage (metrics) hook in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog

from agent_core import Charge, LlmCall, Reservation, RunRequest, Usage, UsageLimitReached
from bot.config import Config
from bot.storage.usage import SqlUsage, UsageKey, UsageTotals, hour_of
from bot.usage.counters import BudgetCounters, LocalCounters, Recount, Refusal
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


@dataclass(eq=False, slots=True)
class _Hold:
    """A reservation's share of the counters."""

    call: LlmCall
    scopes: list[Scope]
    tokens: int
    usd: float
    ceiling: bool
    """The input in ``tokens`` is a ceiling (``call.exact_input`` counts it exactly)."""


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
        self._ceilings: dict[str, set[_Hold]] = {}
        """This process's reservations in flight that hold a ceiling, per scope key: recounted
        exactly when a scope turns exact (``bot/usage/counters.py``, "Ceilings")."""

    # -- agent_core.UsageMeter ----------------------------------------------------------------

    def needs_estimate(self, request: RunRequest) -> bool:
        return bool(scopes_of(self.config, request, self._clock()))

    async def reserve(self, call: LlmCall) -> Reservation:
        now = self._clock()
        scopes = scopes_of(self.config, call.request, now)
        if not scopes:
            return Reservation(call)
        hold = await self._hold(call, scopes)
        try:
            verdict = await self.counters.admit(scopes, hold.tokens, hold.usd, ceiling=hold.ceiling)
            if isinstance(verdict, Recount):
                # Near a limit: decided on exact counts, as if every call had been counted.
                assert call.exact_input is not None  # only a ceiling is answered Recount
                call = replace(call, input_tokens=await call.exact_input(), exact_input=None)
                await self._recount(scopes)
                hold = await self._hold(call, scopes)
                verdict = await self.counters.admit(scopes, hold.tokens, hold.usd)
        except Exception as exc:  # the rollup could not be read: let the call go, say so
            log.warning("usage.check_failed", error=repr(exc), run_id=call.request.run_id)
            return Reservation(call)
        if isinstance(verdict, Refusal):
            scope, unit = verdict.scope, verdict.unit
            raise UsageLimitReached(scope.reason(unit), scope.notice(unit, now), scope.resets_at)
        if hold.ceiling:
            for scope in scopes:
                self._ceilings.setdefault(scope.key, set()).add(hold)
        return Reservation(call, held=hold)

    async def _hold(self, call: LlmCall, scopes: list[Scope]) -> _Hold:
        usd = 0.0
        if any(scope.usd_limit for scope in scopes):
            price = await self.prices.price(call.provider, call.model)
            if price is not None:
                usd = price.cost(Usage(call.input_tokens, call.max_output_tokens))
        ceiling = call.exact_input is not None
        return _Hold(call, scopes, call.estimated_tokens, usd, ceiling)

    async def _recount(self, scopes: list[Scope]) -> None:
        """This process's ceilings held in ``scopes`` become exact estimates."""
        holds = {hold for scope in scopes for hold in self._ceilings.get(scope.key, ())}
        for hold in holds:
            assert hold.call.exact_input is not None
            exact = await self._hold(
                replace(hold.call, input_tokens=await hold.call.exact_input(), exact_input=None),
                hold.scopes,
            )
            if not hold.ceiling:  # settled (or recounted) while this one counted
                continue
            released = (hold.tokens - exact.tokens, hold.usd - exact.usd)
            # The hold changes before the counters do: a settle from here on releases the exact
            # estimate and leaves the ceiling's count to adjust.
            hold.tokens, hold.usd, hold.ceiling = exact.tokens, exact.usd, False
            self._forget_ceiling(hold)
            await self.counters.adjust(hold.scopes, released)

    def _forget_ceiling(self, hold: _Hold) -> None:
        for scope in hold.scopes:
            held = self._ceilings.get(scope.key)
            if held is not None:
                held.discard(hold)
                if not held:
                    del self._ceilings[scope.key]

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
            ceiling, hold.ceiling = hold.ceiling, False  # no recount of it from here on
            if ceiling:
                self._forget_ceiling(hold)
            await self.counters.settle(hold.scopes, (hold.tokens, hold.usd), used, ceiling=ceiling)
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
