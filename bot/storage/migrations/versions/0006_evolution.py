"""Self-evolution: metric snapshots (the rolling window) and suggestions with their history.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "evolution_metrics",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("quality", sa.Float(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_evolution_metrics"),
    )
    op.create_index(
        "ix_evolution_metrics_agent_id_computed_at",
        "evolution_metrics",
        ["agent_id", "computed_at"],
    )
    op.create_table(
        "evolution_suggestions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("rule", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("change", sa.JSON(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_by", sa.String(255), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("previous", sa.JSON(), nullable=True),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'applied', 'rejected', 'rolled_back', 'failed')",
            name="ck_evolution_suggestions_status",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_evolution_suggestions"),
    )
    op.create_index(
        "ix_evolution_suggestions_agent_id_fingerprint",
        "evolution_suggestions",
        ["agent_id", "fingerprint"],
    )
    op.create_index(
        "ix_evolution_suggestions_status_created_at",
        "evolution_suggestions",
        ["status", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_evolution_suggestions_status_created_at", "evolution_suggestions")
    op.drop_index("ix_evolution_suggestions_agent_id_fingerprint", "evolution_suggestions")
    op.drop_table("evolution_suggestions")
    op.drop_index("ix_evolution_metrics_agent_id_computed_at", "evolution_metrics")
    op.drop_table("evolution_metrics")
