"""The limit rule of the in-process counters (``bot/usage/counters.py``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bot.usage.counters import LocalCounters, Recount, Refusal
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


async def test_concurrent_first_calls_of_a_scope_read_its_seed_once() -> None:
    # Many chats starting at once all meet the agent's budget for the first time.
    reads: list[str] = []
    release = asyncio.Event()

    async def seed(s: Scope) -> tuple[int, float]:
        reads.append(s.key)
        await release.wait()
        return 40, 0.0

    counters = LocalCounters(seed)
    calls = [asyncio.create_task(counters.admit([scope(tokens=100)], 10, 0.0)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    refusals = await asyncio.gather(*calls)
    assert reads == ["user:web:a:2026-12-05"]
    assert refusals == [None, None, None, None, None]  # 40 used + 5 x 10 held <= 100


async def test_a_failed_seed_fails_its_waiters_and_the_next_call_reads_again() -> None:
    reads = 0

    async def seed(s: Scope) -> tuple[int, float]:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0)
        if reads == 1:
            raise OSError("database down")
        return 0, 0.0

    counters = LocalCounters(seed)
    first = await asyncio.gather(
        counters.admit([scope(tokens=100)], 10, 0.0),
        counters.admit([scope(tokens=100)], 10, 0.0),
        return_exceptions=True,
    )
    assert [type(r) for r in first] == [OSError, OSError]
    assert await counters.admit([scope(tokens=100)], 10, 0.0) is None
    assert reads == 2


async def test_a_cancelled_seed_read_lets_a_waiter_read_it() -> None:
    reads = 0

    async def seed(s: Scope) -> tuple[int, float]:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.05 if reads == 1 else 0)
        return 0, 0.0

    counters = LocalCounters(seed)
    reader = asyncio.create_task(counters.admit([scope(tokens=100)], 10, 0.0))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(counters.admit([scope(tokens=100)], 10, 0.0))
    await asyncio.sleep(0)
    reader.cancel()
    assert await waiter is None
    assert reader.cancelled() and reads == 2


# -- ceilings (the input estimated without the tokenizer) -------------------------------------


async def test_a_ceiling_that_fits_is_reserved_and_one_that_may_not_asks_for_a_recount() -> None:
    counters = seeded()
    limit = scope(tokens=1000)
    assert await counters.admit([limit], 600, 0.0, ceiling=True) is None
    # 600 + 600 > 1000 with ceilings, but the exact counts may fit: not refused, nothing held
    verdict = await counters.admit([limit], 600, 0.0, ceiling=True)
    assert isinstance(verdict, Recount) and verdict.scope is limit
    # From now on the scope counts exactly: even a small ceiling is sent back
    assert isinstance(await counters.admit([limit], 10, 0.0, ceiling=True), Recount)
    # The held ceiling counted exactly (600 -> 200), then an exact estimate is decided
    await counters.adjust([limit], (400, 0.0))
    assert await counters.admit([limit], 700, 0.0) is None  # 200 + 700 fits
    assert isinstance(await counters.admit([limit], 200, 0.0), Refusal)  # 200 + 700 + 200


async def test_a_ceiling_is_refused_outright_once_the_limit_is_reached() -> None:
    counters = seeded(tokens=1000)
    verdict = await counters.admit([scope(tokens=1000)], 5, 0.0, ceiling=True)
    assert isinstance(verdict, Refusal) and verdict.unit == "tokens"


async def test_settling_a_ceiling_releases_it_whole() -> None:
    counters = seeded()
    limit = scope(tokens=1000)
    assert await counters.admit([limit], 900, 0.0, ceiling=True) is None
    await counters.settle([limit], (900, 0.0), (50, 0.0), ceiling=True)
    assert await counters.admit([limit], 900, 0.0) is None  # alone: 50 used
    # Only the new 900 is held: 50 + 900 + 50 fits, one more token does not.
    assert await counters.admit([limit], 50, 0.0) is None
    assert isinstance(await counters.admit([limit], 1, 0.0), Refusal)
