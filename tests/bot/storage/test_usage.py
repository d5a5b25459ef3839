"""The hourly usage rollup (``bot/storage/usage.py``) on SQLite and Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from bot.storage import Database
from bot.storage.models import UsageHourRow
from bot.storage.usage import SqlUsage, UsageKey, UsageTotals, hour_of
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 5, 14, 30, tzinfo=UTC)


def key(
    at: datetime = NOW, *, agent: str = "main", user: str = "web:alice", model: str = "m1"
) -> UsageKey:
    return UsageKey(hour_of(at), agent, user.split(":")[0], user, "openai", model)


def call(
    inputs: int, outputs: int, cost: float | None, *, cached: int = 0, run: bool = True
) -> UsageTotals:
    return UsageTotals.of_call(inputs, outputs, cached, cost, run)


async def test_calls_of_one_hour_and_key_share_one_row(db: Database) -> None:  # noqa: F811
    usage = SqlUsage(db)
    usage.add(key(), call(100, 10, 0.01, cached=40))
    usage.add(key(NOW + timedelta(minutes=20)), call(200, 20, 0.02, run=False))
    await usage.flush()
    usage.add(key(NOW + timedelta(minutes=25)), call(300, 30, 0.03))  # a second batch: upsert
    total = await usage.total(since=NOW - timedelta(days=1))
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (600, 60, 40)
    assert total.cost_usd == pytest.approx(0.06)
    assert (total.runs, total.calls, total.unpriced_calls) == (2, 3, 0)
    count = await db.run_read(
        lambda conn: conn.execute(select(func.count()).select_from(UsageHourRow)).scalar()
    )
    assert count == 1


async def test_breakdowns_by_each_dimension_and_day(db: Database) -> None:  # noqa: F811
    usage = SqlUsage(db)
    usage.add(key(), call(100, 10, 0.5))
    usage.add(key(user="telegram:42", model="m2"), call(1000, 100, 2.0))
    usage.add(key(NOW - timedelta(days=2), agent="helper"), call(50, 5, None))
    since = NOW - timedelta(days=7)
    by_user = await usage.breakdown(since=since, by="user")
    assert [(r.key, r.totals.input_tokens) for r in by_user] == [
        ("telegram:42", 1000),  # the largest cost first
        ("web:alice", 150),
    ]
    by_channel = {r.key: r.totals.tokens for r in await usage.breakdown(since=since, by="channel")}
    assert by_channel == {"telegram": 1100, "web": 165}
    by_agent = {r.key: r.totals.cost_usd for r in await usage.breakdown(since=since, by="agent")}
    assert by_agent == {"main": pytest.approx(2.5), "helper": None}  # unknown price: null
    by_model = {r.key: r.totals.calls for r in await usage.breakdown(since=since, by="model")}
    assert by_model == {"m1": 2, "m2": 1}
    days = await usage.breakdown(since=since, by="day")
    assert [(r.key, r.totals.input_tokens) for r in days] == [
        ("2026-12-03", 50),
        ("2026-12-05", 1100),
    ]


async def test_totals_filter_by_period_agent_and_user(db: Database) -> None:  # noqa: F811
    usage = SqlUsage(db)
    usage.add(key(NOW - timedelta(days=1)), call(1, 1, 0.1))
    usage.add(key(), call(10, 10, 1.0))
    usage.add(key(agent="helper", user="web:bob"), call(100, 100, None))
    today = NOW.replace(hour=0, minute=0)
    assert (await usage.total(since=today)).tokens == 220
    assert (await usage.total(since=today - timedelta(days=1), until=today)).tokens == 2
    assert (await usage.total(since=today, user_id="web:alice")).tokens == 20
    helper = await usage.total(since=today, agent_id="helper")
    assert helper.tokens == 200 and helper.cost_usd is None and helper.unpriced_calls == 1
    assert (await usage.total(since=NOW + timedelta(hours=2))).calls == 0


async def test_increments_gather_before_one_write_unless_a_reader_asks(
    db: Database,  # noqa: F811
) -> None:
    writer = SqlUsage(db, delay=30.0)  # nothing would be written for 30 s on its own
    other = SqlUsage(db)  # another process's view: reads only what was written
    writer.add(key(), call(100, 10, 0.01))
    writer.add(key(), call(100, 10, 0.01))
    assert (await other.total(since=NOW - timedelta(days=1))).calls == 0
    assert (await writer.total(since=NOW - timedelta(days=1))).calls == 2  # flushed at once
    assert (await other.total(since=NOW - timedelta(days=1))).calls == 2
