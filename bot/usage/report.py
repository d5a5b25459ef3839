"""A usage report as ``loopgate usage``, the dashboard and its JSON API show it: the totals of
a period at the top level, a breakdown under ``rows`` and, for charts, one row per UTC day."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.errors import BotError
from bot.storage.usage import DIMENSIONS, Dimension, SqlUsage, UsageRow

_SINCE = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
DEFAULT_SINCE = "7d"


class BadPeriod(BotError, ValueError):
    """``--since`` / ``?since=`` is neither ``<n>h``, ``<n>d``, ``<n>w`` nor a date."""


def parse_since(text: str, now: datetime) -> datetime:
    """``7d``, ``24h``, ``2w`` back from ``now``, or a date (``2026-12-01``) in UTC."""
    match = _SINCE.match(text)
    if match is not None:
        return now - int(match[1]) * _UNITS[match[2]]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadPeriod(
            f"since: {text!r} is not a period like 7d, 24h, 2w or a date like 2026-12-01"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def parse_by(text: str | None) -> Dimension:
    if text is None or text == "":
        return "model"
    if text not in DIMENSIONS:
        raise BadPeriod(f"by: {text!r} is not one of {', '.join(DIMENSIONS)}")
    return text


async def usage_report(
    store: SqlUsage,
    *,
    since: datetime,
    by: Dimension = "model",
    days: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``{"since", "until", "by", <totals>, "rows": [...], "days": [...]}`` (days when asked)."""
    until = now or datetime.now(UTC)
    rows = await store.breakdown(since=since, by=by)
    total = await store.total(since=since)
    report: dict[str, Any] = {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "by": by,
        **total.as_dict(),
        "rows": [row.as_dict(by) for row in rows],
    }
    if days:
        report["days"] = [row.as_dict("day") for row in await _days(store, since, until)]
    return report


async def _days(store: SqlUsage, since: datetime, until: datetime) -> list[UsageRow]:
    """Every day of the period, the quiet ones as zeros, so a chart's axis has no gaps."""
    found = {row.key: row for row in await store.breakdown(since=since, by="day")}
    out: list[UsageRow] = []
    day = since.astimezone(UTC).date()
    while day <= until.astimezone(UTC).date():
        key = day.isoformat()
        out.append(found.get(key, UsageRow(key)))
        day += timedelta(days=1)
    return out
