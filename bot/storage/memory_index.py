"""The memory index behind ``memory_search`` (:class:`agent_core.memory.MemoryIndex`).

Chunks live in ``memory_chunks`` on both backends; ranking is the database's own full-text
search (migration 0003):

- **SQLite**: FTS5 table ``memory_chunks_fts`` (porter stemming, diacritics folded), ranked with
  ``bm25`` where a match in the heading weighs :data:`HEADING_WEIGHT` times a match in the text.
- **Postgres**: generated ``search_vector`` (heading weight A, content B, ``english`` config)
  with a GIN index, ranked with ``ts_rank``.

A query matches chunks containing *any* of its words; more (and rarer) words rank higher. Query
words are extracted with :func:`agent_core.memory.query_terms`, so operators and punctuation in
what the model typed never reach FTS5's or Postgres' query parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlalchemy import Connection, TextClause, delete, insert, select, text

from agent_core import FileStamp, MemoryDocument, MemoryHit, query_terms
from bot.storage._db import Database
from bot.storage._sql import clean, dialect_insert
from bot.storage.models import MemoryChunkRow, MemoryFileRow, utcnow

TS_CONFIG = "english"  # same as migration 0003's generated column
HEADING_WEIGHT = 4.0

_SQLITE_SEARCH = text(
    f"""
    SELECT c.path, c.heading, c.start_line, c.end_line, c.content,
           -bm25(memory_chunks_fts, {HEADING_WEIGHT}, 1.0) AS score
    FROM memory_chunks_fts JOIN memory_chunks AS c ON c.id = memory_chunks_fts.rowid
    WHERE memory_chunks_fts MATCH :query AND c.workspace_key = :workspace
    ORDER BY score DESC, c.path, c.chunk_no
    LIMIT :limit
    """
)
_POSTGRES_SEARCH = text(
    f"""
    SELECT c.path, c.heading, c.start_line, c.end_line, c.content,
           ts_rank(c.search_vector, q.query) AS score
    FROM memory_chunks AS c, to_tsquery('{TS_CONFIG}', :query) AS q(query)
    WHERE c.workspace_key = :workspace AND c.search_vector @@ q.query
    ORDER BY score DESC, c.path, c.chunk_no
    LIMIT :limit
    """
)


def fts5_query(terms: Sequence[str]) -> str:
    """``"a" OR "b"``: each term a quoted FTS5 string, so nothing in it is an operator."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def tsquery(terms: Sequence[str]) -> str:
    """``a | b`` for ``to_tsquery``; the terms hold only letters and digits."""
    return " | ".join(terms)


class SqlMemoryIndex:
    """Implements :class:`agent_core.memory.MemoryIndex` on SQLite (FTS5) and Postgres."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def search(self, workspace_key: str, query: str, limit: int) -> list[MemoryHit]:
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        if self.db.dialect == "postgresql":
            statement, q = _POSTGRES_SEARCH, tsquery(terms)
        else:
            statement, q = _SQLITE_SEARCH, fts5_query(terms)
        params = {"query": q, "workspace": workspace_key, "limit": limit}
        return await self.db.run_read(partial(_search, statement, params))

    async def stamps(self, workspace_key: str) -> dict[str, FileStamp]:
        query = select(MemoryFileRow.path, MemoryFileRow.mtime_ns, MemoryFileRow.size).where(
            MemoryFileRow.workspace_key == workspace_key
        )
        return await self.db.run_read(
            lambda conn: {
                row.path: FileStamp(row.mtime_ns, row.size) for row in conn.execute(query)
            }
        )

    async def reindex(
        self,
        workspace_key: str,
        files: Sequence[MemoryDocument],
        removed: Sequence[str] = (),
    ) -> None:
        # SQLite: queued with the other writers
        await self.db.run_write(partial(_reindex, self.db.dialect, workspace_key, files, removed))


def _search(statement: TextClause, params: dict[str, Any], conn: Connection) -> list[MemoryHit]:
    return [
        MemoryHit(
            path=row.path,
            heading=row.heading,
            start_line=row.start_line,
            end_line=row.end_line,
            content=row.content,
            score=float(row.score),
        )
        for row in conn.execute(statement, params)
    ]


def _reindex(
    dialect: str,
    workspace_key: str,
    files: Sequence[MemoryDocument],
    removed: Sequence[str],
    conn: Connection,
) -> None:
    for doc in files:
        # The upsert comes first: it locks the file's row, so two processes
        # re-indexing the same file take turns instead of duplicating its chunks.
        _upsert_file(conn, dialect, workspace_key, doc)
        _delete_chunks(conn, workspace_key, doc.path)
        rows = [
            {
                "workspace_key": workspace_key,
                "path": doc.path,
                "chunk_no": c.chunk_no,
                "heading": clean(c.heading),
                "start_line": c.start_line,
                "end_line": c.end_line,
                "content": clean(c.content),
            }
            for c in doc.chunks
        ]
        if rows:
            conn.execute(insert(MemoryChunkRow), rows)
    for path in removed:
        _delete_chunks(conn, workspace_key, path)
        conn.execute(
            delete(MemoryFileRow).where(
                MemoryFileRow.workspace_key == workspace_key, MemoryFileRow.path == path
            )
        )


def _upsert_file(conn: Connection, dialect: str, key: str, doc: MemoryDocument) -> None:
    values: dict[str, Any] = {
        "workspace_key": key,
        "path": doc.path,
        "mtime_ns": doc.stamp.mtime_ns,
        "size": doc.stamp.size,
        "indexed_at": utcnow(),
    }
    stmt = dialect_insert(dialect, MemoryFileRow).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=["workspace_key", "path"],
        set_={k: stmt.excluded[k] for k in ("mtime_ns", "size", "indexed_at")},
    )
    conn.execute(stmt)


def _delete_chunks(conn: Connection, key: str, path: str) -> None:
    conn.execute(
        delete(MemoryChunkRow).where(
            MemoryChunkRow.workspace_key == key, MemoryChunkRow.path == path
        )
    )
