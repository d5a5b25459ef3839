"""Tables of the self-evolution engine (``bot/evolution``), migration 0006.

Kept out of :mod:`bot.storage.models` only for size; they use the same ``Base`` (the package
imports this module, so ``Base.metadata`` always has them).
"""

from __future__ import annotations

from sqlalchemy import JSON, CheckConstraint, Float, Index, Integer, String, Text

from bot.storage._table import column
from bot.storage.models import Base, BigIntId, UTCDateTime, utcnow

SUGGESTION_STATUSES = ("pending", "approved", "applied", "rejected", "rolled_back", "failed")


class MetricSnapshotRow(Base):
    """One agent's metrics over the window ending at ``computed_at``, written each cycle.
    Snapshots older than the window are pruned, so the table is the rolling window."""

    __tablename__ = "evolution_metrics"
    __table_args__ = (
        Index("ix_evolution_metrics_agent_id_computed_at", "agent_id", "computed_at"),
    )

    id = column(BigIntId, primary_key=True, autoincrement=True)
    agent_id = column(String(255))
    computed_at = column(UTCDateTime(), default=utcnow)
    window_start = column(UTCDateTime())
    runs = column(Integer())
    quality = column(Float())
    metrics = column(JSON())


class SuggestionRow(Base):
    """An evolution suggestion and its whole history: who decided and when, the value it
    replaced (``previous``, for rollback), the baseline metrics and the outcome. ``history`` is
    a JSON list of ``{"at", "event", "by", "detail"}``. ``fingerprint`` identifies the same
    change for the same agent and rule, so it is not suggested twice."""

    __tablename__ = "evolution_suggestions"
    __table_args__ = (
        Index("ix_evolution_suggestions_agent_id_fingerprint", "agent_id", "fingerprint"),
        Index("ix_evolution_suggestions_status_created_at", "status", "created_at"),
        CheckConstraint(f"status IN {SUGGESTION_STATUSES!r}", name="status"),
    )

    id = column(String(32), primary_key=True)
    agent_id = column(String(255))
    rule = column(String(64))
    status = column(String(16))
    fingerprint = column(String(64))
    evidence = column(JSON())
    change = column(JSON())
    summary = column(Text())
    reason = column(Text(), default="")
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)
    decided_by = column(String(255), nullable=True)
    decided_at = column(UTCDateTime(), nullable=True)
    applied_at = column(UTCDateTime(), nullable=True)
    previous = column(JSON(), nullable=True)
    baseline = column(JSON(), nullable=True)
    outcome = column(Text(), nullable=True)
    history = column(JSON(), default=list)
