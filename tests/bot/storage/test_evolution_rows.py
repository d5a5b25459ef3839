"""bot/storage/_evolution_rows.py: the self-evolution tables on each backend: a suggestion's
status is one of the known states (the database refuses any other), and its JSON columns and
defaults read back as written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from bot.storage import Database
from bot.storage._evolution_rows import SUGGESTION_STATUSES, MetricSnapshotRow, SuggestionRow


def suggestion(status: str, suggestion_id: str = "s1") -> dict[str, Any]:
    return {
        "id": suggestion_id,
        "agent_id": "main",
        "rule": "long_answers",
        "status": status,
        "fingerprint": "f" * 64,
        "evidence": {"runs": 12, "share": 0.4, "note": "Xin chào"},
        "change": {"param": "max_tokens", "value": 512},
        "summary": "Answers are too long",
    }


async def test_every_known_status_is_stored_and_read_back(db: Database) -> None:
    values = [suggestion(status, f"s{i}") for i, status in enumerate(SUGGESTION_STATUSES)]
    await db.run_write(lambda c: c.execute(insert(SuggestionRow), values))
    rows = await db.run_read(
        lambda c: c.execute(select(SuggestionRow).order_by(SuggestionRow.id)).all()
    )
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
        await db.run_write(lambda c: c.execute(insert(SuggestionRow).values(**suggestion(status))))
    ids = await db.run_read(lambda c: c.execute(select(SuggestionRow.id)).scalars().all())
    assert list(ids) == []


async def test_a_metric_snapshot_keeps_its_metrics(db: Database) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    snapshot = insert(MetricSnapshotRow).values(
        agent_id="main",
        window_start=start,
        runs=3,
        quality=0.75,
        metrics={"failures": 1, "p95_ms": 812.5},
    )
    await db.run_write(lambda c: c.execute(snapshot))
    row = await db.run_read(lambda c: c.execute(select(MetricSnapshotRow)).first())
    assert row is not None
    assert (row.runs, row.quality, row.metrics) == (3, 0.75, {"failures": 1, "p95_ms": 812.5})
    assert row.window_start == start and row.id > 0
