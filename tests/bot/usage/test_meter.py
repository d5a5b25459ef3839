"""The usage meter (``bot/usage/meter.py``): reservation, settlement, the accounting seam."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_core import LlmCall, RunRequest, Usage, UsageLimitReached
from bot.config import parse_config
from bot.storage import Database
from bot.storage.usage import SqlUsage
from bot.usage import CallUsage, Meter
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 5, 10, tzinfo=UTC)


def meter(database: Database, **sections: object) -> Meter:
    config = parse_config(
        {"providers": {"openai": {"pricing": {"input_per_mtok": 1, "output_per_mtok": 2}}}}
        | sections,
        {},
    )
    return Meter(config, SqlUsage(database), clock=lambda: NOW)


def llm_call(user: str = "web:alice", *, first: bool = True, max_output: int = 100) -> LlmCall:
    request = RunRequest("s", "hi", user, channel="web")
    return LlmCall(request, "openai", "gpt-x", 1, 50, max_output, first_of_run=first)


async def test_a_settled_call_is_priced_accounted_once_and_handed_to_the_sinks(
    db: Database,  # noqa: F811
) -> None:
    m = meter(db)
    seen: list[CallUsage] = []
    m.sinks.append(seen.append)
    assert not m.needs_estimate(llm_call().request)  # no limit: nothing to estimate
    charge = await m.settle(await m.reserve(llm_call()), Usage(1000, 500, 200))
    assert charge.cost_usd == pytest.approx((1000 + 500 * 2) / 1e6)
    assert charge.price_source == "config"
    [accounted] = seen
    assert (accounted.agent_id, accounted.channel, accounted.user_id) == (
        "main",
        "web",
        "web:alice",
    )
    assert (accounted.model, accounted.cached_input_tokens, accounted.new_run) == (
        "gpt-x",
        200,
        True,
    )
    total = await m.store.total(since=NOW.replace(hour=0))
    assert (total.runs, total.calls, total.input_tokens) == (1, 1, 1000)


async def test_a_failed_call_releases_its_reservation_and_counts_nothing(
    db: Database,  # noqa: F811
) -> None:
    m = meter(db, usage={"user_daily_tokens": 200})
    assert m.needs_estimate(llm_call().request)
    held = await m.reserve(llm_call())  # 150 of 200 held
    # another call in flight: 150 + 150 would overshoot
    with pytest.raises(UsageLimitReached) as refused:
        await m.reserve(llm_call(first=False))
    assert refused.value.reason == "usage.user_daily_tokens"
    released = await m.settle(held, None)
    assert (released.cost_usd, released.price_source) == (None, None)
    assert (await m.store.total(since=NOW.replace(hour=0))).calls == 0
    await m.settle(await m.reserve(llm_call()), Usage(150, 60))  # admitted again, then used
    with pytest.raises(UsageLimitReached):
        await m.reserve(llm_call())  # 210 recorded: the limit is reached


async def test_the_counters_start_from_what_the_rollup_recorded(
    db: Database,  # noqa: F811
) -> None:
    first = meter(db)
    await first.settle(await first.reserve(llm_call()), Usage(300, 0))
    await first.store.flush()
    restarted = meter(db, usage={"user_daily_tokens": 200})  # a new process, same database
    with pytest.raises(UsageLimitReached):
        await restarted.reserve(llm_call())
    assert await restarted.price_note("openai", "gpt-x") == (
        "$1/Mtok input, $2/Mtok output, $1/Mtok cached input (config)"
    )


async def test_a_check_that_fails_lets_the_call_go(db: Database) -> None:  # noqa: F811
    m = meter(db, usage={"user_daily_tokens": 1})

    class Broken:
        async def admit(self, *args: object) -> None:
            raise OSError("database unreachable")

        async def settle(self, *args: object) -> None:
            raise AssertionError("nothing was reserved")

    m.counters = Broken()  # type: ignore[assignment]
    held = await m.reserve(llm_call())
    charge = await m.settle(held, Usage(10, 1))
    assert charge.cost_usd is not None  # still priced and accounted


async def test_a_broken_price_table_prices_nothing_and_fails_no_call(
    db: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.usage import pricing

    def broken(*args: object) -> None:
        raise RuntimeError("table corrupt")

    monkeypatch.setattr(pricing, "table_price", broken)
    m = Meter(parse_config({}, {}), SqlUsage(db), clock=lambda: NOW)
    charge = await m.settle(await m.reserve(llm_call()), Usage(10, 1))
    assert (charge.cost_usd, charge.price_source) == (None, None)
