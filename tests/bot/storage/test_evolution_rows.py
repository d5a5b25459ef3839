"""bot/storage/_evolution_rows.py: the self-evolution tables on each backend: a suggestion's
status is one of the known states (the database refuses any other), and its JSON columns and
defaults read back as written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from bot.storage import Database
from bot.storage._evolution_rows import SUGGESTION_STATUSES, MetricSnapshotRow, SuggestionRow


def suggestion(status: str, suggestion_id: str = "s1") -> SuggestionRow:
    return SuggestionRow(
        id=suggestion_id,
        agent_id="main",
        rule="long_answers",
        status=status,
        fingerprint="f" * 64,
        evidence={"runs": 12, "share": 0.4, "note": "Xin chào"},
        change={"param": "max_tokens", "value": 512},
        summary="Answers are too long",
    )


async def test_every_known_status_is_stored_and_read_back(db: Database) -> None:
    async with db.write() as session:
        for i, status in enumerate(SUGGESTION_STATUSES):
            session.add(suggestion(status, f"s{i}"))
    async with db.sessionmaker() as session:
        rows = list(await session.scalars(select(SuggestionRow).order_by(SuggestionRow.id)))
    assert [r.status for r in rows] == list(SUGGESTION_STATUSES)
    first = rows[0]
    assert first.evidence == {"runs": 12, "share": 0.4, "note": "Xin chào"}
    assert first.change == {"param": "max_tokens", "value": 512}
    # Defaults: an empty reason and history, no decision yet, timestamps in UTC.
    assert (first.reason, first.history, first.decided_by, first.previous) == ("", [], None, None)
    assert first.created_at.tzinfo is not None
    assert abs(first.created_at - datetime.now(UTC)) < timedelta(minutes=5)


@pytest.mark.parametrize("status", ["done", "PENDING", ""])
async def test_an_unknown_status_is_refused(db: Database, status: str) -> None:
    with pytest.raises(IntegrityError):
        async with db.write() as session:
            session.add(suggestion(status))
    async with db.sessionmaker() as session:
        assert list(await session.scalars(select(SuggestionRow.id))) == []


async def test_a_metric_snapshot_keeps_its_metrics(db: Database) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with db.write() as session:
        session.add(
            MetricSnapshotRow(
                agent_id="main",
                window_start=start,
                runs=3,
                quality=0.75,
                metrics={"failures": 1, "p95_ms": 812.5},
            )
        )
    async with db.sessionmaker() as session:
        row = await session.scalar(select(MetricSnapshotRow))
    assert row is not None
    assert (row.runs, row.quality, row.metrics) == (3, 0.75, {"failures": 1, "p95_ms": 812.5})
    assert row.window_start == start and row.id > 0
