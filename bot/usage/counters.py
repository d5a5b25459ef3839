"""The counters behind the limits: used and reserved, per scope and period.

A counter starts from what the hourly rollup recorded for its period (``seed``), then follows
every call: :meth:`BudgetCounters.admit` checks and reserves a call's estimate in all of its
scopes at once, :meth:`BudgetCounters.settle` swaps the estimate for what the call used.

The rule, per scope and unit (tokens, USD), with ``used`` what calls recorded and ``reserved``
what calls in flight hold:

- ``used >= limit``: refused (the limit is reached);
- other calls in flight and ``used + reserved + estimate > limit``: refused, so concurrent runs
  can't overshoot together;
- otherwise the call is admitted and its estimate reserved. A lone call is not refused for its
  estimate alone (it may use far less than its ``max_tokens``): a limit is overshot by at most
  one call's real usage.

**Ceilings.** An estimate's input usually comes as a *ceiling* (``admit(..., ceiling=True)``),
counted without the tokenizer, which is never below the exact count. A ceiling that fits fits
exactly too, and a limit already reached refuses whatever the estimates, so those decisions
are the exact ones. A ceiling refused by the in-flight rule is not refused: :class:`Recount`
answers instead, nothing is reserved, and the scope counts *exactly* from then on (every
ceiling there is answered :class:`Recount`): the meter counts the call exactly, recounts its own
ceilings held in those scopes (:meth:`BudgetCounters.adjust`), and asks again with
``ceiling=False``. Near its limit a scope is thus decided as exact counting decides it. With
several processes, a ceiling another process reserved there before the scope turned exact stays
a ceiling until its call settles: a check meanwhile may refuse a call that exact counting
would have admitted (never the other way round).

:class:`LocalCounters` keeps them in this process (one process is the whole service); with
``redis.url`` the cluster's Redis counters are shared by every process
(``bot/cluster/usage_counters.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.usage.limits import Scope, Unit

Seed = Callable[[Scope], Awaitable[tuple[int, float]]]
"""What the rollup recorded in a scope's period so far: (tokens, USD)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    scope: Scope
    unit: Unit


@dataclass(frozen=True, slots=True)
class Recount:
    """The ceiling could decide otherwise than exact counting: count exactly and ask again."""

    scope: Scope


class BudgetCounters(Protocol):
    async def admit(
        self, scopes: Sequence[Scope], tokens: int, usd: float, *, ceiling: bool = False
    ) -> Refusal | Recount | None:
        """Reserve ``tokens`` and ``usd`` in every scope, or none and say which refuses;
        :class:`Recount` (only for a ``ceiling``) when exact counts must decide."""

    async def settle(
        self,
        scopes: Sequence[Scope],
        reserved: tuple[int, float],
        used: tuple[int, float],
        *,
        ceiling: bool = False,
    ) -> None:
        """Release a call's reservation (a ``ceiling`` one) and count what it used."""

    async def adjust(self, scopes: Sequence[Scope], released: tuple[int, float]) -> None:
        """A ceiling held in ``scopes`` was counted exactly: ``released`` (the ceiling minus
        the exact estimate) goes back, and it is a ceiling no longer."""


@dataclass(slots=True)
class _Counter:
    used_tokens: int
    used_usd: float
    reserved_tokens: int = 0
    reserved_usd: float = 0.0
    in_flight: int = 0
    ceilings: int = 0
    """Calls in flight whose reservation is a ceiling."""
    exact: bool = False
    """Ceilings are answered :class:`Recount` (the scope came near its limit)."""


def limit_reached(scope: Scope, used: tuple[int, float]) -> bool:
    """Whether what calls recorded reached a limit of ``scope`` (refused whatever the
    estimates)."""
    return bool(
        (scope.token_limit and used[0] >= scope.token_limit)
        or (scope.usd_limit and used[1] >= scope.usd_limit)
    )


def refusal_unit(
    scope: Scope,
    used: tuple[int, float],
    reserved: tuple[int, float],
    in_flight: int,
    estimate: tuple[int, float],
) -> Unit | None:
    """The unit in which ``scope`` refuses a call (the rule above), or None."""
    checks: list[tuple[Unit, float, float, float, float]] = [
        ("tokens", scope.token_limit, used[0], reserved[0], estimate[0]),
        ("usd", scope.usd_limit, used[1], reserved[1], estimate[1]),
    ]
    for unit, limit, spent, held, wanted in checks:
        if not limit:
            continue
        if spent >= limit or (in_flight and spent + held + wanted > limit):
            return unit
    return None


class LocalCounters:
    """Counters in this process's memory."""

    def __init__(self, seed: Seed) -> None:
        self._seed = seed
        self._counters: dict[str, _Counter] = {}
        self._seeding: dict[str, asyncio.Future[tuple[int, float]]] = {}
        """Seeds being read: concurrent first calls of a scope (an agent's budget, when many
        chats start at once) wait for the one read instead of each reading the rollup."""

    async def admit(
        self, scopes: Sequence[Scope], tokens: int, usd: float, *, ceiling: bool = False
    ) -> Refusal | Recount | None:
        for scope in scopes:
            if scope.key not in self._counters:
                used_tokens, used_usd = await self._seeded(scope)
                # A concurrent admit may have seeded it while this one awaited.
                self._counters.setdefault(scope.key, _Counter(used_tokens, used_usd))
        # From here on no await: checking and reserving are one step for the event loop.
        for scope in scopes:
            c = self._counters[scope.key]
            if ceiling and c.exact:
                return Recount(scope)
            used = (c.used_tokens, c.used_usd)
            unit = refusal_unit(
                scope, used, (c.reserved_tokens, c.reserved_usd), c.in_flight, (tokens, usd)
            )
            if unit is not None:
                if ceiling and not limit_reached(scope, used):
                    c.exact = True
                    return Recount(scope)
                return Refusal(scope, unit)
        for scope in scopes:
            c = self._counters[scope.key]
            c.reserved_tokens += tokens
            c.reserved_usd += usd
            c.in_flight += 1
            c.ceilings += ceiling
        self._forget_old(scopes)
        return None

    async def _seeded(self, scope: Scope) -> tuple[int, float]:
        while (pending := self._seeding.get(scope.key)) is not None:
            try:
                return await asyncio.shield(pending)  # a waiter cancelled leaves the read be
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this waiter was cancelled
                # The reader was cancelled: the next one reads.
        pending = asyncio.get_running_loop().create_future()
        self._seeding[scope.key] = pending
        try:
            seeded = await self._seed(scope)
        except Exception as exc:  # the waiters fail as this call does
            pending.set_exception(exc)
            pending.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        except BaseException:
            pending.cancel()
            raise
        finally:
            del self._seeding[scope.key]
        pending.set_result(seeded)
        return seeded

    async def settle(
        self,
        scopes: Sequence[Scope],
        reserved: tuple[int, float],
        used: tuple[int, float],
        *,
        ceiling: bool = False,
    ) -> None:
        self._release(scopes, reserved, used, calls=1, ceilings=int(ceiling))

    async def adjust(self, scopes: Sequence[Scope], released: tuple[int, float]) -> None:
        self._release(scopes, released, (0, 0.0), calls=0, ceilings=1)

    def _release(
        self,
        scopes: Sequence[Scope],
        reserved: tuple[int, float],
        used: tuple[int, float],
        *,
        calls: int,
        ceilings: int,
    ) -> None:
        """``reserved`` back, ``calls`` in flight and ``ceilings`` fewer, ``used`` counted."""
        for scope in scopes:
            c = self._counters.get(scope.key)
            if c is None:
                continue
            c.reserved_tokens = max(c.reserved_tokens - reserved[0], 0)
            c.reserved_usd = max(c.reserved_usd - reserved[1], 0.0)
            c.in_flight = max(c.in_flight - calls, 0)
            c.ceilings = max(c.ceilings - ceilings, 0)
            c.used_tokens += used[0]
            c.used_usd += used[1]

    def _forget_old(self, current: Sequence[Scope]) -> None:
        """Yesterday's counters go once today's exist (keys carry their period)."""
        if len(self._counters) < 10_000:
            return
        keep = {scope.key for scope in current}
        for key in [k for k, c in self._counters.items() if not c.in_flight and k not in keep]:
            del self._counters[key]
