"""Periods and breakdowns of a usage report (``bot/usage/report.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.usage.report import BadPeriod, parse_by, parse_since

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "since"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("24h", NOW - timedelta(hours=24)),
        (" 2w ", NOW - timedelta(weeks=2)),
        ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-01T06:00:00+02:00", datetime(2026, 12, 1, 4, tzinfo=UTC)),
    ],
)
def test_periods(text: str, since: datetime) -> None:
    assert parse_since(text, NOW) == since


@pytest.mark.parametrize("text", ["", "7", "7y", "last week", "-3d"])
def test_bad_periods(text: str) -> None:
    with pytest.raises(BadPeriod, match="is not a period like 7d, 24h, 2w or a date"):
        parse_since(text, NOW)


def test_breakdowns() -> None:
    assert parse_by(None) == "model"
    assert [parse_by(by) for by in ("agent", "channel", "user")] == ["agent", "channel", "user"]
    with pytest.raises(BadPeriod, match="one of agent, channel, user, model"):
        parse_by("day")
