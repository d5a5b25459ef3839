"""bot/storage/_db.py: opening, migrations, pragmas and bad URLs, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect
from structlog.testing import capture_logs

from agent_core.messages import Message
from bot.storage import Database, SqlSessionStore, StorageError, head_revision, open_database
from bot.storage._engine import pool_room_warning
from bot.storage.models import Base
from tests.bot.storage.storage_fixtures import _append
from tests.storage_support import Backend
from tests.waiting import wait_until

TABLES = {
    "sessions",
    "messages",
    "summaries",
    "traces",
    "spans",
    "channel_state",
    "processed_messages",
    "agents",
    "memory_files",
    "memory_chunks",
    "inbox",
    "agent_links",
    "teams",
    "team_tasks",
    "cron_jobs",
}


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _file_exists(path: str) -> bool:
    return Path(path).is_file()


def _revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def test_new_database_is_migrated_to_head(backend: Backend) -> None:
    async with await backend.open() as db:
        assert TABLES | {"alembic_version"} <= await db.run_read(_tables)
        assert await db.run_read(_revision) == head_revision() == "0009"
    if backend.name == "sqlite":
        assert _file_exists(backend.url.split("///", 1)[1])  # its parent dir was created


async def test_reopen_is_idempotent_and_keeps_data(backend: Backend) -> None:
    async with await backend.open() as db:
        await _append(SqlSessionStore(db), "s", Message.user("kept"))
    async with await backend.open() as db:
        history = await SqlSessionStore(db).load_history("s")
        assert await db.run_read(_revision) == head_revision()
    assert [m.content for m in history.messages] == ["kept"]


def _portable_schema(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave out the memory index's full-text objects, which exist only in migration 0003
    and differ per dialect: SQLite's FTS5 virtual table ``memory_chunks_fts`` and its shadow
    tables (``memory_chunks_fts_data``, ``_idx``, ``_docsize``, ``_config``), Postgres'
    generated ``search_vector`` column and its GIN index. Everything else is compared."""
    if type_ == "table" and name and name.startswith("memory_chunks_fts"):
        return False
    if type_ == "column" and name == "search_vector" and reflected:
        return False
    return not (type_ == "index" and name == "ix_memory_chunks_search_vector")


async def test_models_match_migrations(db: Database) -> None:
    def diff(conn: Connection) -> list[Any]:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_object": _portable_schema}
        )
        return list(compare_metadata(context, Base.metadata))

    assert await db.run_read(diff) == []


async def test_sqlite_pragmas_on_the_writes_and_the_reads_connections(tmp_path: Path) -> None:
    def pragmas(conn: Connection) -> list[Any]:
        return [
            conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "cache_size")
        ]

    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        # cache_size negative: KiB, not pages.
        assert await db.run_write(pragmas) == ["wal", 1, 5000, -256]
        assert await db.run_read(pragmas) == ["wal", 1, 5000, -256]


async def test_in_memory_database_is_shared_across_sessions() -> None:
    async with await open_database("sqlite+aiosqlite:///:memory:") as db:
        store = SqlSessionStore(db)
        await _append(store, "s", Message.user("hi"))
        assert len((await store.load_history("s")).messages) == 1


@pytest.mark.parametrize("url", ["not a url", "mysql+aiomysql://u:secret@h/db", "sqlite:"])
async def test_bad_url_raises_storage_error(url: str) -> None:
    with pytest.raises(StorageError) as info:
        await open_database(url)
    assert "secret" not in str(info.value)


async def test_unreachable_postgres_raises_without_password() -> None:
    with pytest.raises(StorageError) as info:
        await open_database("postgresql+asyncpg://bob:hunter2@127.0.0.1:1/nope")
    message = str(info.value)
    assert "hunter2" not in message
    assert "bob:***@127.0.0.1:1/nope" in message


async def test_unwritable_sqlite_path_raises_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StorageError, match="cannot open database"):
        await open_database(f"sqlite+aiosqlite:///{tmp_path}/file/sub/x.db")


async def test_concurrent_start_up_migrates_once(backend: Backend) -> None:
    databases = await asyncio.gather(*(backend.open() for _ in range(4)))
    for database in databases:
        await database.aclose()
    async with await backend.open() as db:
        assert await db.run_read(_revision) == head_revision()


def backend_pid(conn: Connection) -> int:
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


async def pid_held_a_moment(db: Database) -> int:
    """The backend of a pooled connection, held a moment: calls at once get one each."""
    assert db.engine is not None  # Postgres
    async with db.engine.connect() as conn:
        pid = await conn.run_sync(backend_pid)
        await asyncio.sleep(0.05)
        return pid


async def test_connections_a_burst_opened_are_kept_for_the_next(backend: Backend) -> None:
    """database.pool_size connections at most, all kept: a burst needing more waits for one
    instead of opening a connection to close it again, and the next burst opens none (the
    former 10 kept + 5 overflow opened and closed one connection every few replies)."""
    if backend.name != "postgres":
        pytest.skip("SQLite's pool is not sized by database.pool_size")

    db = await open_database(backend.url, schema=backend.schema, pool_size=3)
    async with db:
        first = set(await asyncio.gather(*(pid_held_a_moment(db) for _ in range(6))))
        second = set(await asyncio.gather(*(pid_held_a_moment(db) for _ in range(6))))
    assert len(first) == 3
    assert second == first


async def test_a_pool_larger_than_the_server_has_room_for_is_named(
    backend: Backend,
) -> None:
    async with await backend.open() as db:
        with capture_logs() as logs:
            await db.warn_if_pool_too_large(500)
            await db.warn_if_pool_too_large(2)
    warnings = [entry for entry in logs if entry["event"] == "storage.pool_too_large"]
    if backend.name != "postgres":  # SQLite has no connection limit: nothing to say
        assert warnings == []
        return
    assert [entry["pool_size"] for entry in warnings] == [500]  # the server's default is 100
    assert "max_connections" in warnings[0]["detail"]


def test_the_pool_room_counts_the_asking_connection_as_the_pools_own() -> None:
    assert pool_room_warning(10, max_connections=20, reserved=3, in_use=8) == ""  # 20-3-8+1=10
    warning = pool_room_warning(11, max_connections=20, reserved=3, in_use=8)
    assert warning.startswith("database.pool_size 11 is more than the 10 connections")


async def test_connections_the_server_closed_are_replaced_without_a_failed_request(
    backend: Backend,
) -> None:
    # A Postgres restart (here: its backends terminated) leaves the pool holding dead
    # connections; the next requests must get live ones, not an error, and without a ping
    # round trip per checkout (_replace_if_closed asks asyncpg, which saw the close).
    if backend.name != "postgres":
        pytest.skip("SQLite files are not closed by a server")

    async with await backend.open() as db:
        assert db.engine is not None  # Postgres
        async with db.engine.connect() as admin:
            pids = set(await asyncio.gather(*(pid_held_a_moment(db) for _ in range(3))))
            assert len(pids) == 3  # pooled now, the admin connection not among them
            listed = ", ".join(map(str, pids))
            killed = await admin.exec_driver_sql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                f" WHERE pid IN ({listed})"
            )
            assert killed.scalar_one() == 3
            await admin.commit()

            async def gone() -> bool:
                found = await admin.exec_driver_sql(
                    f"SELECT count(*) FROM pg_stat_activity WHERE pid IN ({listed})"
                )
                await admin.commit()
                return found.scalar_one() == 0

            await wait_until(gone, what="the terminated backends to exit")
            await asyncio.sleep(0.05)  # the event loop reads their closed sockets
            for _ in range(4):  # every pooled connection is handed out once more
                assert await db.run_read(backend_pid) not in pids
                assert await db.run_write(backend_pid) not in pids


async def test_one_statement_writes_and_reads_skip_the_transaction_round_trips_on_postgres(
    db: Database,
) -> None:
    # run_statement and run_read need no BEGIN ... COMMIT/ROLLBACK around them on Postgres
    # (two round trips each); run_write keeps its transaction. Either way the write is there.
    def in_transaction(conn: Connection) -> bool:
        driver = conn.connection.dbapi_connection.driver_connection  # type: ignore[union-attr]
        return bool(driver.is_in_transaction())

    def write(key: str) -> Callable[[Connection], bool]:
        def work(conn: Connection) -> bool:
            conn.exec_driver_sql(
                "INSERT INTO channel_state (channel, key, value, updated_at) "
                f"VALUES ('t', '{key}', 'v', CURRENT_TIMESTAMP)"
            )
            return in_transaction(conn) if db.dialect == "postgresql" else True

        return work

    def count(conn: Connection) -> int:
        return int(conn.exec_driver_sql("SELECT count(*) FROM channel_state").scalar_one())

    assert await db.run_write(write("a")) is True
    postgres = db.dialect == "postgresql"
    assert await db.run_statement(write("b")) is (not postgres)
    assert await db.run_read(count) == 2
    if postgres:
        assert await db.run_read(in_transaction) is False
