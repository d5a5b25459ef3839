"""Inbox: the platform ids of a streamed answer's preview messages.

A process killed while it streamed leaves its preview ("pause-1 pau") in the chat; the replay
deletes the messages listed here before it answers.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("inbox", sa.Column("previews", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inbox") as batch:
        batch.drop_column("previews")
