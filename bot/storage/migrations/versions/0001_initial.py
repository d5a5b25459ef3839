"""Initial schema: sessions, messages, summaries, traces, spans, channel_state,
processed_messages.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

# Written out by hand (not imported from bot.storage.models) so this revision keeps creating
# exactly this schema after the models move on.
BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ts(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("compaction_count", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_sessions"),
    )
    op.create_table(
        "messages",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_call_id", sa.String(255), nullable=True),
        sa.Column("name", sa.String(255), nullable=True),
        _ts("created_at"),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant', 'tool')", name="ck_messages_role"
        ),
        sa.ForeignKeyConstraint(
            ["session_key"],
            ["sessions.key"],
            name="fk_messages_session_key_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
    )
    op.create_index("ix_messages_session_key_id", "messages", ["session_key", "id"])
    op.create_table(
        "summaries",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(
            ["session_key"],
            ["sessions.key"],
            name="fk_summaries_session_key_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_summaries"),
    )
    op.create_index("ix_summaries_session_key", "summaries", ["session_key"])
    op.create_table(
        "traces",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        _ts("started_at"),
        _ts("ended_at", nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("output_preview", sa.Text(), nullable=False),
        sa.Column("input_preview", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_traces"),
    )
    op.create_index("ix_traces_run_id", "traces", ["run_id"])
    op.create_index("ix_traces_started_at", "traces", ["started_at"])
    op.create_index("ix_traces_session_key_started_at", "traces", ["session_key", "started_at"])
    op.create_table(
        "spans",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(64), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        _ts("started_at"),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Boolean(), nullable=False),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trace_id"], ["traces.id"], name="fk_spans_trace_id_traces", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_spans"),
    )
    op.create_index("ix_spans_trace_id", "spans", ["trace_id"])
    op.create_table(
        "channel_state",
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("channel", "key", name="pk_channel_state"),
    )
    op.create_table(
        "processed_messages",
        sa.Column("key", sa.String(255), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("key", name="pk_processed_messages"),
    )
    op.create_index("ix_processed_messages_created_at", "processed_messages", ["created_at"])


def downgrade() -> None:
    op.drop_table("processed_messages")
    op.drop_table("channel_state")
    op.drop_table("spans")
    op.drop_table("traces")
    op.drop_table("summaries")
    op.drop_table("messages")
    op.drop_table("sessions")
