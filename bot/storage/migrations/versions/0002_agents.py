"""Agents defined at run time (``loopgate agents set``), resolved by the agent router.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(64), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("system_prompt", sa.Text(), nullable=True),
        sa.Column("max_iterations", sa.Integer(), nullable=True),
        sa.Column("context_window", sa.Integer(), nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("fallback_provider", sa.String(64), nullable=True),
        sa.Column("fallback_model", sa.String(255), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
    )


def downgrade() -> None:
    op.drop_table("agents")
