"""bot/storage/_sql.py: the helpers that keep SQLite and Postgres alike: one upsert for both,
NUL-free text, and a JSON serializer that takes what span attributes hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from sqlalchemy import Connection, Table, func, select
from sqlalchemy.dialects import postgresql, sqlite

from bot.storage import Database
from bot.storage._inbox_sql import accept_statement, claim_statement
from bot.storage._sql import (
    NUL_REPLACEMENT,
    clean,
    clean_optional,
    dialect_insert,
    dump_json,
    table_of,
    upsert_insert,
)
from bot.storage.models import MemoryFileRow


def test_dump_json_keeps_non_ascii_and_stringifies_the_rest() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    value = {"text": "Xin chào 😀", "at": at, "id": UUID(int=1), "path": Path("/a/b")}
    out = dump_json(value)
    assert "Xin chào 😀" in out  # not \u escapes
    assert json.loads(out) == {
        "text": "Xin chào 😀",
        "at": str(at),
        "id": str(UUID(int=1)),
        "path": "/a/b",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("", ""),
        ("a\x00b\x00", f"a{NUL_REPLACEMENT}b{NUL_REPLACEMENT}"),
        ("\x00", NUL_REPLACEMENT),
    ],
)
def test_clean_replaces_every_nul(text: str, expected: str) -> None:
    assert clean(text) == expected
    assert clean_optional(text) == expected


def test_clean_optional_keeps_none() -> None:
    assert clean_optional(None) is None


def test_table_of_is_the_mapped_table() -> None:
    table = table_of(MemoryFileRow)
    assert isinstance(table, Table) and table.name == "memory_files"


def test_dialect_insert_picks_the_dialect() -> None:
    assert isinstance(dialect_insert("postgresql", table_of(MemoryFileRow)), postgresql.Insert)
    assert isinstance(dialect_insert("sqlite", table_of(MemoryFileRow)), sqlite.Insert)


async def test_one_upsert_works_on_each_backend(db: Database) -> None:
    async def upsert(size: int) -> None:
        stmt = upsert_insert(db, MemoryFileRow).values(
            workspace_key="w", path="MEMORY.md", mtime_ns=1, size=size
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["workspace_key", "path"], set_={"size": stmt.excluded.size}
        )
        await db.run_write(lambda conn: conn.execute(stmt))

    def count_and_size(conn: Connection) -> tuple[int | None, int | None]:
        return (
            conn.execute(select(func.count()).select_from(MemoryFileRow)).scalar(),
            conn.execute(select(MemoryFileRow.size)).scalar(),
        )

    await upsert(10)
    await upsert(20)
    assert await db.run_read(count_and_size) == (1, 20)


async def test_do_nothing_leaves_the_first_row(db: Database) -> None:
    stmt = dialect_insert(db.dialect, table_of(MemoryFileRow)).on_conflict_do_nothing()

    async def insert(size: int) -> None:
        row = {
            "workspace_key": "w",
            "path": "p",
            "mtime_ns": 0,
            "size": size,
            "indexed_at": datetime.now(UTC),
        }
        await db.run_write(lambda conn: conn.execute(stmt, row))

    for size in (1, 2):
        await insert(size)
    sizes = await db.run_read(lambda conn: list(conn.execute(select(MemoryFileRow.size)).scalars()))
    assert sizes == [1]


@pytest.mark.parametrize("dialect", [postgresql.dialect(), sqlite.dialect()], ids=["pg", "sqlite"])
def test_the_statements_a_moved_message_runs_are_not_rewritten_per_execution(
    dialect: object,
) -> None:
    # A claim and a kept message's store: an IN list of bound values would be expanded again
    # at each execution (SQLAlchemy's post-compile step); the pending states are in the SQL.
    for statement in (
        claim_statement(start_first=True),
        claim_statement(start_first=False),
        accept_statement(behind_waiting=True),
    ):
        compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        assert not compiled.post_compile_params
        assert "IN ('queued', 'running')" in str(compiled)
