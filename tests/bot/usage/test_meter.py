"""The usage meter (``bot/usage/meter.py``): reservation, settlement, the accounting seam."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from agent_core import LlmCall, Reservation, RunRequest, Usage, UsageLimitReached
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
        async def admit(self, *args: object, **kwargs: object) -> None:
            raise OSError("database unreachable")

        async def settle(self, *args: object, **kwargs: object) -> None:
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


# -- ceilings: the input estimated without the tokenizer ---------------------------------------


class Input:
    """A call's input as the loop gives it: a ceiling, and its exact count on demand."""

    def __init__(self, exact: int, ceiling: int) -> None:
        self.exact, self.ceiling = exact, ceiling
        self.counted = 0

    async def __call__(self) -> int:
        self.counted += 1
        await asyncio.sleep(0)  # the tokenizer loads in a thread: others may go meanwhile
        return self.exact

    def call(self, *, first: bool = False, max_output: int = 100, user: str = "alice") -> LlmCall:
        request = RunRequest("s", "hi", f"web:{user}", channel="web")
        return LlmCall(request, "openai", "gpt-x", 1, self.ceiling, max_output,
                       first_of_run=first, exact_input=self)  # fmt: skip


async def test_far_from_a_limit_the_input_is_never_counted_exactly(
    db: Database,  # noqa: F811
) -> None:
    m = meter(db, usage={"user_daily_tokens": 1_000_000, "user_daily_usd": 1000})
    inputs = [Input(exact=100, ceiling=1600) for _ in range(20)]
    held = [await m.reserve(i.call()) for i in inputs]
    for ticket in held:
        await m.settle(ticket, Usage(100, 10))
    assert [i.counted for i in inputs] == [0] * 20


async def test_near_a_limit_the_ceilings_are_recounted_and_the_exact_decision_taken(
    db: Database,  # noqa: F811
) -> None:
    m = meter(db, usage={"user_daily_tokens": 1000})
    a, b, c = Input(100, 800), Input(100, 800), Input(700, 700)
    first = await m.reserve(a.call())  # lone: admitted, 900 held (a ceiling)
    # 900 + 900 > 1000 by the ceilings; exactly 200 + 200: admitted, both recounted
    second = await m.reserve(b.call())
    assert (a.counted, b.counted) == (1, 1)
    # 200 + 200 + 800 > 1000 exactly: refused, as exact counting refuses it
    with pytest.raises(UsageLimitReached):
        await m.reserve(c.call())
    for ticket in (first, second):
        await m.settle(ticket, None)
    # Everything held was released whole: a lone call goes through again
    await m.settle(await m.reserve(Input(100, 800).call()), None)


async def test_decisions_with_ceilings_are_those_of_exact_counting(
    db: Database,  # noqa: F811
) -> None:
    """Random reservations and settlements by six users against their token quotas and the
    agent's USD budget: a meter given ceilings (up to 20x the exact input) refuses exactly the
    calls a meter given exact counts refuses, step by step."""
    rng = random.Random(7)
    limits = {
        "usage": {"user_daily_tokens": 40_000},
        "agents": {"defaults": {"budget": {"daily_usd": 0.4}}},
    }
    with_ceilings, with_exact = meter(db, **limits), meter(db, **limits)
    held: list[tuple[Reservation, Reservation]] = []
    decisions = refused = 0
    inputs: list[Input] = []
    for _ in range(1500):
        if held and rng.random() < 0.4:
            one, other = held.pop(rng.randrange(len(held)))
            usage = Usage(rng.randrange(10, 200), rng.randrange(50))
            if rng.random() < 0.2:
                usage = None  # a failed call: released, nothing used
            await with_ceilings.settle(one, usage)
            await with_exact.settle(other, usage)
            continue
        exact = rng.randrange(50, 3000)
        given = Input(exact, exact * rng.randrange(1, 21))
        inputs.append(given)
        ceiling_call = given.call(max_output=rng.randrange(100, 2000), user=f"u{rng.randrange(6)}")
        exact_call = replace(ceiling_call, input_tokens=exact, exact_input=None)
        verdicts, tickets = [], []
        for m, call in ((with_ceilings, ceiling_call), (with_exact, exact_call)):
            try:
                tickets.append(await m.reserve(call))
                verdicts.append(True)
            except UsageLimitReached:
                verdicts.append(False)
        decisions += 1
        assert verdicts[0] == verdicts[1], f"decision {decisions}"
        if verdicts[0]:
            held.append((tickets[0], tickets[1]))
        else:
            refused += 1
    recounted = sum(i.counted > 0 for i in inputs)
    # The run went near the limits: some calls refused, some counted exactly
    assert 0 < refused < decisions, (refused, decisions)
    assert 0 < recounted < len(inputs), (recounted, len(inputs))
