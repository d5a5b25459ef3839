"""Memory index for memory_search: memory files, their chunks, and dialect full-text search.

SQLite: an FTS5 virtual table over ``memory_chunks`` (external content, ``porter`` stemming)
kept in sync by triggers. Postgres: a generated ``tsvector`` column (heading weighted A,
content B) with a GIN index. The models (``MemoryFileRow``, ``MemoryChunkRow``) describe only
the portable part; ``tests/bot/storage/test_db.py`` leaves the full-text objects out of its
models-vs-migrations comparison.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS_CONFIG = "english"  # keep in sync with bot/storage/memory_index.py

_SQLITE_UP = (
    "CREATE VIRTUAL TABLE memory_chunks_fts USING fts5(heading, content, "
    "content='memory_chunks', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER memory_chunks_ai AFTER INSERT ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(rowid, heading, content) "
    "VALUES (new.id, new.heading, new.content); END",
    "CREATE TRIGGER memory_chunks_ad AFTER DELETE ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(memory_chunks_fts, rowid, heading, content) "
    "VALUES ('delete', old.id, old.heading, old.content); END",
    "CREATE TRIGGER memory_chunks_au AFTER UPDATE ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(memory_chunks_fts, rowid, heading, content) "
    "VALUES ('delete', old.id, old.heading, old.content); "
    "INSERT INTO memory_chunks_fts(rowid, heading, content) "
    "VALUES (new.id, new.heading, new.content); END",
)
_POSTGRES_UP = (
    "ALTER TABLE memory_chunks ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    f"setweight(to_tsvector('{TS_CONFIG}', coalesce(heading, '')), 'A') || "
    f"setweight(to_tsvector('{TS_CONFIG}', coalesce(content, '')), 'B')) STORED",
    "CREATE INDEX ix_memory_chunks_search_vector ON memory_chunks USING gin (search_vector)",
)


def upgrade() -> None:
    op.create_table(
        "memory_files",
        sa.Column("workspace_key", sa.String(1024), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workspace_key", "path", name="pk_memory_files"),
    )
    op.create_table(
        "memory_chunks",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("workspace_key", sa.String(1024), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("chunk_no", sa.Integer(), nullable=False),
        sa.Column("heading", sa.Text(), nullable=False),
        sa.Column("start_line", sa.Integer(), nullable=False),
        sa.Column("end_line", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory_chunks"),
    )
    op.create_index(
        "ix_memory_chunks_workspace_key_path", "memory_chunks", ["workspace_key", "path"]
    )
    statements = _SQLITE_UP if op.get_bind().dialect.name == "sqlite" else _POSTGRES_UP
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("memory_chunks_ai", "memory_chunks_ad", "memory_chunks_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS memory_chunks_fts")
    op.drop_index("ix_memory_chunks_workspace_key_path", table_name="memory_chunks")
    op.drop_table("memory_chunks")
    op.drop_table("memory_files")
