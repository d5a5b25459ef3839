"""``/usage`` in chat (``bot/usage/summary.py``): the asker's own day and month."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.storage import Database
from bot.storage.usage import SqlUsage, UsageKey, UsageTotals, hour_of
from bot.usage.summary import user_summary
from tests.storage_support import backend, db  # noqa: F401

NOW = datetime(2026, 12, 15, 9, tzinfo=UTC)


def add(usage: SqlUsage, at: datetime, user: str, model: str, totals: UsageTotals) -> None:
    usage.add(UsageKey(hour_of(at), "main", "telegram", user, "openai", model), totals)


async def test_today_and_this_month_of_the_asker_only(db: Database) -> None:  # noqa: F811
    usage = SqlUsage(db)
    add(usage, NOW, "telegram:1", "a", UsageTotals.of_call(1000, 100, 0, 0.01, True))
    add(
        usage,
        NOW - timedelta(days=3),
        "telegram:1",
        "a",
        UsageTotals.of_call(2000, 200, 0, 0.02, True),
    )
    add(
        usage,
        NOW - timedelta(days=3),
        "telegram:1",
        "local",
        UsageTotals.of_call(5, 5, 0, None, False),
    )
    add(usage, NOW - timedelta(days=20), "telegram:1", "a", UsageTotals.of_call(9, 9, 0, 9.0, True))
    add(usage, NOW, "telegram:2", "a", UsageTotals.of_call(7, 7, 0, 7.0, True))
    text = await user_summary(usage, "telegram:1", NOW)
    assert text == (
        "Your usage here (UTC):\n"
        "today: 1,000 input + 100 output tokens, $0.0100, 1 run\n"
        "this month (December 2026): 3,005 input + 305 output tokens, "
        "$0.0300 (some models' price unknown), 2 runs"
    )


async def test_only_unpriced_models_say_the_cost_is_unknown(db: Database) -> None:  # noqa: F811
    usage = SqlUsage(db)
    add(usage, NOW, "telegram:1", "local", UsageTotals.of_call(5, 5, 0, None, True))
    text = await user_summary(usage, "telegram:1", NOW)
    assert "today: 5 input + 5 output tokens, cost unknown, 1 run" in text
