"""The limit rule of the in-process counters (``bot/usage/counters.py``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bot.usage.counters import LocalCounters
from bot.usage.limits import Scope

SINCE = datetime(2026, 12, 5, tzinfo=UTC)


def scope(tokens: int = 0, usd: float = 0.0, key: str = "user:web:a:2026-12-05") -> Scope:
    return Scope(key, "user_daily", SINCE, SINCE, token_limit=tokens, usd_limit=usd)


def seeded(tokens: int = 0, usd: float = 0.0) -> LocalCounters:
    async def seed(_: Scope) -> tuple[int, float]:
        await asyncio.sleep(0)  # a database read: other admissions may run meanwhile
        return tokens, usd

    return LocalCounters(seed)


async def test_a_lone_call_is_admitted_under_the_limit_whatever_its_estimate() -> None:
    counters = seeded(tokens=900)
    assert await counters.admit([scope(tokens=1000)], 5000, 0.0) is None


async def test_a_call_is_refused_once_recorded_usage_reached_the_limit() -> None:
    counters = seeded(tokens=900)
    limit = scope(tokens=1000)
    assert await counters.admit([limit], 50, 0.0) is None
    await counters.settle([limit], (50, 0.0), (100, 0.0))
    refusal = await counters.admit([limit], 50, 0.0)
    assert refusal is not None and refusal.unit == "tokens" and refusal.scope is limit


async def test_calls_in_flight_reserve_their_estimate() -> None:
    counters = seeded()
    limit = scope(tokens=1000)
    verdicts = await asyncio.gather(*(counters.admit([limit], 400, 0.0) for _ in range(4)))
    assert [v is None for v in verdicts] == [True, True, False, False]
    # one settles below its estimate: its reservation is released, what it used is counted
    await counters.settle([limit], (400, 0.0), (100, 0.0))
    assert await counters.admit([limit], 400, 0.0) is None  # 100 used + 400 + 400 held
    assert await counters.admit([limit], 400, 0.0) is not None


async def test_usd_limits_and_all_or_nothing_across_scopes() -> None:
    counters = seeded()
    user, agent = scope(tokens=10_000), scope(usd=1.0, key="agent:main:2026-12-05")
    assert await counters.admit([user, agent], 100, 0.6) is None
    refusal = await counters.admit([user, agent], 100, 0.6)
    assert refusal is not None and refusal.scope is agent and refusal.unit == "usd"
    # the refused call held nothing in the user's scope either
    assert await counters.admit([user], 9_800, 0.0) is None
