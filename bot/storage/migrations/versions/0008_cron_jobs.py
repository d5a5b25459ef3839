"""Scheduled jobs (the cron tool, heartbeats): docs/scheduling.md.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "cron_jobs",
        sa.Column("id", sa.String(80), nullable=False),
        sa.Column("agent_id", sa.String(64), nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("chat", sa.String(255), nullable=False),
        sa.Column("origin", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("spec", sa.String(255), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("schedule", sa.String(255), nullable=False),
        sa.Column("anchor", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_outcome", sa.String(255), nullable=True),
        sa.Column("last_entry", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('once', 'every', 'cron')", name="ck_cron_jobs_kind"),
        sa.PrimaryKeyConstraint("id", name="pk_cron_jobs"),
    )
    op.create_index("ix_cron_jobs_next_run_at", "cron_jobs", ["next_run_at"])
    op.create_index("ix_cron_jobs_user_id", "cron_jobs", ["user_id"])


def downgrade() -> None:
    op.drop_table("cron_jobs")
