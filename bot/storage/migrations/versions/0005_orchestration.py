"""Multi-agent orchestration: agent links, teams, team tasks, and child traces.

``traces`` gains ``parent_trace_id``/``parent_span_id``: a spawned or delegated run records the
run and the tool span that started it, so ``loopgate traces`` prints the whole tree.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "agent_links",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "direction IN ('outbound', 'inbound', 'bidirectional')",
            name="ck_agent_links_direction",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_agent_links"),
        sa.UniqueConstraint("source", "target", name="uq_agent_links_source_target"),
    )
    op.create_index("ix_agent_links_target", "agent_links", ["target"])
    op.create_table(
        "teams",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("lead", sa.String(64), nullable=False),
        sa.Column("members", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_teams"),
    )
    op.create_table(
        "team_tasks",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("assignee", sa.String(64), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("comments", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('open', 'assigned', 'in_progress', 'completed', 'failed', 'cancelled')",
            name="ck_team_tasks_status",
        ),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name="fk_team_tasks_team_id_teams",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_team_tasks"),
    )
    op.create_index("ix_team_tasks_team_id_status", "team_tasks", ["team_id", "status"])
    # Plain ADD COLUMN works on both backends; no batch (table copy) needed on SQLite.
    op.add_column("traces", sa.Column("parent_trace_id", sa.String(64), nullable=True))
    op.add_column("traces", sa.Column("parent_span_id", sa.String(64), nullable=True))
    op.create_index("ix_traces_parent_trace_id", "traces", ["parent_trace_id"])


def downgrade() -> None:
    op.drop_index("ix_traces_parent_trace_id", table_name="traces")
    # Plain DROP COLUMN (SQLite >= 3.35), not a batch table copy: with foreign_keys=ON,
    # dropping the old traces table would cascade-delete every span.
    op.drop_column("traces", "parent_span_id")
    op.drop_column("traces", "parent_trace_id")
    op.drop_index("ix_team_tasks_team_id_status", table_name="team_tasks")
    op.drop_table("team_tasks")
    op.drop_table("teams")
    op.drop_index("ix_agent_links_target", table_name="agent_links")
    op.drop_table("agent_links")
