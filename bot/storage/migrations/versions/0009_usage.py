"""Usage per hour by agent, channel, user and model: docs/usage.md.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "usage_hourly",
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("agent_id", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "hour", "agent_id", "channel", "user_id", "provider", "model", name="pk_usage_hourly"
        ),
    )
    op.create_index("ix_usage_hourly_user_id", "usage_hourly", ["user_id", "hour"])
    op.create_index("ix_usage_hourly_agent_id", "usage_hourly", ["agent_id", "hour"])


def downgrade() -> None:
    op.drop_table("usage_hourly")
