"""The dashboard's "Usage" page and ``/admin/api/usage``: tokens, cost and runs per day and by
agent, channel, user or model, from the hourly rollup (docs/usage.md).

The page and the API give the same report as ``loopgate usage --json`` (``bot/usage/report.py``),
plus one row per day for the charts, which the page draws with uPlot (vendored in ``static/``:
``uPlot.iife.min.js`` and ``uPlot.min.css`` of the npm package uplot 1.6.32, MIT, its licence
beside them in ``uPlot.LICENSE``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.app import Loopgate
from bot.usage.report import DEFAULT_SINCE, parse_by, parse_since, usage_report

UPLOT_VERSION = "1.6.32"


async def report(loopgate: Loopgate, since: str | None, by: str | None) -> dict[str, Any]:
    """Raises :class:`bot.usage.report.BadPeriod` for a bad ``since`` or ``by``."""
    now = datetime.now(UTC)
    text = since or DEFAULT_SINCE
    found = await usage_report(
        loopgate.meter.store, since=parse_since(text, now), by=parse_by(by), days=True, now=now
    )
    found["period"] = text
    return found
