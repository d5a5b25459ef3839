"""``/usage`` in chat: the asker's own usage today and this month (UTC), from the rollup."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.storage.usage import SqlUsage, UsageTotals
from bot.usage.limits import day_start, month_start


async def user_summary(store: SqlUsage, user_id: str, now: datetime | None = None) -> str:
    """``user_id`` as runs carry it (``<channel>:<sender id>``)."""
    now = now or datetime.now(UTC)
    today = await store.total(since=day_start(now), user_id=user_id)
    month = await store.total(since=month_start(now), user_id=user_id)
    return (
        f"Your usage here (UTC):\ntoday: {_line(today)}\nthis month ({now:%B %Y}): {_line(month)}"
    )


def _line(totals: UsageTotals) -> str:
    if totals.cost_usd is None:
        cost = "cost unknown" if totals.calls else "$0"
    else:
        cost = f"${totals.cost_usd:.4f}"
        if totals.unpriced_calls:
            cost += " (some models' price unknown)"
    return (
        f"{totals.input_tokens:,} input + {totals.output_tokens:,} output tokens, {cost}, "
        f"{totals.runs} {'run' if totals.runs == 1 else 'runs'}"
    )
