"""SQL for the evolution engine: suggestions (with their history) and metric snapshots.

Status changes are compare-and-set UPDATEs (``WHERE status = <expected>``): an admin pressing
approve in the dashboard while ``loopgate evolution reject`` runs on the same database decides
the suggestion once, and the loser gets a clear error instead of overwriting the winner.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update

from bot.evolution.records import AgentMetrics, Suggestion, SuggestionStatus
from bot.storage import Database, MetricSnapshotRow, SuggestionRow
from bot.storage.models import utcnow


def fingerprint(agent_id: str, rule: str, change: dict[str, Any]) -> str:
    """The same change by the same rule for the same agent: a suggestion made once."""
    text = json.dumps([agent_id, rule, change], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class SuggestionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, suggestion: Suggestion) -> None:
        values = _values(suggestion)
        values["fingerprint"] = fingerprint(suggestion.agent_id, suggestion.rule, suggestion.change)
        await self._db.run_statement(
            lambda conn: conn.execute(insert(SuggestionRow).values(**values))
        )

    async def get(self, suggestion_id: str) -> Suggestion | None:
        query = select(SuggestionRow).where(SuggestionRow.id == suggestion_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).one_or_none())
        return None if row is None else _from_row(row)

    async def list(
        self,
        status: SuggestionStatus | None = None,
        agent_id: str | None = None,
        rule: str | None = None,
    ) -> builtins.list[Suggestion]:
        """Newest first."""
        query = select(SuggestionRow).order_by(
            SuggestionRow.created_at.desc(), SuggestionRow.id.desc()
        )
        if status is not None:
            query = query.where(SuggestionRow.status == str(status))
        if agent_id is not None:
            query = query.where(SuggestionRow.agent_id == agent_id)
        if rule is not None:
            query = query.where(SuggestionRow.rule == rule)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [_from_row(r) for r in rows]

    async def same_change(self, agent_id: str, print_: str) -> builtins.list[Suggestion]:
        """Every suggestion with this fingerprint for the agent, newest first."""
        query = (
            select(SuggestionRow)
            .where(SuggestionRow.agent_id == agent_id, SuggestionRow.fingerprint == print_)
            .order_by(SuggestionRow.created_at.desc())
        )
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [_from_row(r) for r in rows]

    async def transition(
        self, suggestion: Suggestion, expected: SuggestionStatus, **changes: Any
    ) -> Suggestion | None:
        """Save ``suggestion`` with ``changes`` if its stored status is still ``expected``;
        None when another process changed it first. A ``history`` entry in ``changes`` is
        appended to the suggestion's history."""
        event = changes.pop("event", None)
        now = utcnow()
        history = suggestion.history + ((event,) if event else ())
        new = replace(suggestion, **changes, history=history, updated_at=now)
        values = _values(new)
        values.pop("id")
        values.pop("created_at")
        statement = (
            update(SuggestionRow)
            .where(SuggestionRow.id == suggestion.id, SuggestionRow.status == str(expected))
            .values(**values)
        )
        done = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        return new if done else None

    # -- metric snapshots (the rolling window) --------------------------------------------------

    async def save_snapshots(self, metrics: Sequence[AgentMetrics], computed_at: datetime) -> None:
        if not metrics:
            return
        rows = [
            {
                "agent_id": m.agent_id,
                "computed_at": computed_at,
                "window_start": m.window_start,
                "runs": m.runs,
                "quality": m.quality,
                "metrics": m.as_dict(),
            }
            for m in metrics
        ]
        # run_write, not run_statement: an executemany may be sent as several INSERTs.
        await self._db.run_write(lambda conn: conn.execute(insert(MetricSnapshotRow), rows))

    async def prune_snapshots(self, before: datetime) -> int:
        statement = delete(MetricSnapshotRow).where(MetricSnapshotRow.computed_at < before)
        removed: int = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        return removed

    async def snapshots(self, agent_id: str | None = None) -> builtins.list[dict[str, Any]]:
        """Stored snapshots, oldest first: ``{"agent_id", "computed_at", "runs", "quality",
        "metrics"}`` (a trend for the dashboard)."""
        query = select(MetricSnapshotRow).order_by(
            MetricSnapshotRow.computed_at, MetricSnapshotRow.id
        )
        if agent_id is not None:
            query = query.where(MetricSnapshotRow.agent_id == agent_id)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [
            {
                "agent_id": r.agent_id,
                "computed_at": r.computed_at,
                "runs": r.runs,
                "quality": r.quality,
                "metrics": dict(r.metrics),
            }
            for r in rows
        ]


def _values(s: Suggestion) -> dict[str, Any]:
    return {
        "id": s.id,
        "agent_id": s.agent_id,
        "rule": s.rule,
        "status": str(s.status),
        "evidence": s.evidence,
        "change": s.change,
        "summary": s.summary,
        "reason": s.reason,
        "created_at": s.created_at,
        "updated_at": s.updated_at or s.created_at,
        "decided_by": s.decided_by,
        "decided_at": s.decided_at,
        "applied_at": s.applied_at,
        "previous": s.previous,
        "baseline": s.baseline,
        "outcome": s.outcome,
        "history": list(s.history),
    }


def _from_row(row: Row[Any]) -> Suggestion:
    return Suggestion(
        id=row.id,
        agent_id=row.agent_id,
        rule=row.rule,
        status=SuggestionStatus(row.status),
        evidence=dict(row.evidence),
        change=dict(row.change),
        summary=row.summary,
        created_at=row.created_at,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        applied_at=row.applied_at,
        baseline=dict(row.baseline) if row.baseline is not None else None,
        outcome=row.outcome,
        reason=row.reason,
        previous=dict(row.previous) if row.previous is not None else None,
        history=tuple(row.history or ()),
        updated_at=row.updated_at,
    )


def history_event(event: str, by: str | None = None, detail: str = "") -> dict[str, Any]:
    return {"at": utcnow().isoformat(), "event": event, "by": by, "detail": detail}
