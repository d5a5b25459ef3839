"""The durable inbox: inbound messages stored before the platform is acknowledged.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "inbox",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("message", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'answered', 'dropped', 'failed', 'expired')",
            name="ck_inbox_state",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_inbox"),
    )
    op.create_index("ix_inbox_state_id", "inbox", ["state", "id"])


def downgrade() -> None:
    op.drop_index("ix_inbox_state_id", table_name="inbox")
    op.drop_table("inbox")
