"""Tables of the self-evolution engine (``bot/evolution``), migration 0006.

Kept out of :mod:`bot.storage.models` only for size; they use the same ``Base`` (the package
imports this module, so ``Base.metadata`` always has them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bot.storage.models import Base, BigIntId, UTCDateTime, utcnow

SUGGESTION_STATUSES = ("pending", "approved", "applied", "rejected", "rolled_back", "failed")


class MetricSnapshotRow(Base):
    """One agent's metrics over the window ending at ``computed_at``, written each cycle.
    Snapshots older than the window are pruned, so the table is the rolling window."""

    __tablename__ = "evolution_metrics"
    __table_args__ = (
        Index("ix_evolution_metrics_agent_id_computed_at", "agent_id", "computed_at"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(255))
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    runs: Mapped[int] = mapped_column(Integer())
    quality: Mapped[float] = mapped_column(Float())
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON())


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

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(255))
    rule: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    fingerprint: Mapped[str] = mapped_column(String(64))
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON())
    change: Mapped[dict[str, Any]] = mapped_column(JSON())
    summary: Mapped[str] = mapped_column(Text())
    reason: Mapped[str] = mapped_column(Text(), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    decided_by: Mapped[str | None] = mapped_column(String(255))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    previous: Mapped[dict[str, Any] | None] = mapped_column(JSON())
    baseline: Mapped[dict[str, Any] | None] = mapped_column(JSON())
    outcome: Mapped[str | None] = mapped_column(Text())
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON(), default=list)
