"""Opening the database: its connections and schema migrations at start-up.

The same statements run on SQLite (the default) and Postgres (asyncpg). Every transaction is a
plain function of a connection (``run_write``, ``run_read``): on SQLite it runs whole on a
thread of a lane (``_lane.py``), with the sqlite3 driver and no async layer; on Postgres through
SQLAlchemy's async engine, imported only then (``_engine.py``). So a process on SQLite never
loads SQLAlchemy's asyncio extension and the ORM it imports (~7 MiB, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

import structlog
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from bot.storage._checkpoints import WalCheckpoints
from bot.storage._errors import StorageError
from bot.storage._lane import SqliteLane
from bot.storage._sqlite import is_sqlite_memory, sqlite_pragmas
from bot.storage._trace_writer import WRITE_DELAY, TraceWriter
from bot.storage._writer import WriterQueue

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)
T = TypeVar("T")

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/loopgate.db"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Up to 15 connections per process, as SQLAlchemy's default (5 + 10), and all of them kept
# (database.pool_size, no overflow): a connection beyond the kept ones is closed when it is
# returned, so a load that needs a few more than the kept ones opens and closes connections all
# the time, and a new Postgres backend costs both sides a fork, authentication and a cold
# catalog and statement cache (10 kept + 5 overflow opened one connection per eight replies
# for three processes under 40 chats at once; docs/scaling.md, "Stop 41").
POSTGRES_POOL_SIZE = 15

# Plain URLs people paste from elsewhere get the driver this package ships with. A SQLite URL
# keeps its historical ``+aiosqlite`` (config files name it); the lanes open it with sqlite3.
_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
}
_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@]*@")
_MIGRATION_LOCK = 0x4C6F6F70  # arbitrary app-wide key for pg_advisory_xact_lock ("Loop")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# The newest migration in migrations/versions (a test keeps the two in sync). A database already
# there is opened without importing Alembic, which costs ~12 MiB and ~0.2 s at every start.
HEAD_REVISION = "0009"


class Database:
    """Where the stores run their statements; close it with ``aclose`` or ``async with``.

    SQLite: ``lanes`` (writes, reads), the same lane twice for an in-memory database (its one
    connection). Postgres: ``engine``.
    """

    def __init__(
        self,
        url: URL,
        *,
        lanes: tuple[SqliteLane, SqliteLane] | None = None,
        engine: AsyncEngine | None = None,
    ) -> None:
        self._url = url
        self._lanes = lanes
        self.engine = engine
        """Postgres: SQLAlchemy's async engine (for what is not a function of a connection,
        e.g. a connection held across awaits in a test); None on SQLite."""
        self._dialect = "sqlite" if lanes is not None else "postgresql"
        # SQLite: one writer at a time, queued in the event loop (see writer.py). Readers are
        # not queued (WAL). Postgres takes concurrent writers itself.
        self._writer = WriterQueue() if lanes is not None else None
        self.checkpoints = (
            WalCheckpoints(partial(lanes[1].read, _passive_checkpoint), self._writer)
            if lanes is not None and self._writer is not None
            else None
        )
        """SQLite: the log is checkpointed in the background (``checkpoints.py``)."""
        # On Postgres each write transaction costs round trips, which a short delay shares
        # among more traces; on SQLite it is one hop to the lane's thread, and the delay
        # measured no less CPU for ~0.4 MiB more at the peak (traces held meanwhile).
        self.trace_writer = TraceWriter(
            self, delay=WRITE_DELAY if self._dialect == "postgresql" else 0.0
        )
        """Traces are written behind the runs (``bot/storage/_trace_writer.py``)."""
        self._flushes: list[Callable[[], Awaitable[None]]] = []
        # The same pool; its connections are set to autocommit at checkout (an attribute on
        # asyncpg's side, no round trip) and set back when they return.
        self._autocommit_engine = (
            engine.execution_options(isolation_level="AUTOCOMMIT") if engine is not None else None
        )

    async def run_write(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """``work`` with a connection in one write transaction: committed when it returns,
        rolled back when it raises; returns what it returns. On SQLite the whole transaction
        is one hop to the write lane's thread (``lane.py``), after the writers queued before
        it; ``urgent``: a platform waits on this write (an inbound message before its ack)."""
        if self._lanes is None:  # Postgres takes concurrent writers itself
            return await self._engine_transaction(work)
        assert self._writer is not None
        async with self._writer.hold(urgent=urgent):
            result = await self._lanes[0].run(work)
        self._wrote()
        return result

    async def run_statement(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """Like :meth:`run_write` for a ``work`` that executes **one** statement. On Postgres
        that statement runs as its own transaction (autocommit), which is just as atomic and
        saves the ``BEGIN`` and ``COMMIT`` round trips; work with two statements would lose its
        atomicity here: give it to :meth:`run_write`."""
        if self._autocommit_engine is not None:
            return await self._autocommit(work)
        return await self.run_write(work, urgent=urgent)

    async def run_read(self, work: Callable[[Connection], T]) -> T:
        """``work`` with a connection, for reads: on SQLite in one hop to a read lane's thread
        (``lane.py``; WAL lets it run beside the writer); each statement sees what was committed
        before it. On Postgres without a transaction around it: each
        statement sees the data committed before it, as it would in a (read committed)
        transaction, and the ``BEGIN`` and the ``ROLLBACK`` cost two round trips a read."""
        if self._lanes is not None:
            return await self._lanes[1].read(work)
        return await self._autocommit(work)

    async def _engine_transaction(self, work: Callable[[Connection], T]) -> T:
        assert self.engine is not None
        async with self.engine.begin() as conn:
            return await conn.run_sync(work)

    async def _autocommit(self, work: Callable[[Connection], T]) -> T:
        assert self._autocommit_engine is not None
        async with self._autocommit_engine.connect() as conn:
            return await conn.run_sync(work)

    async def _before_start(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction, outside the writer queue (nothing else runs yet)."""
        if self._lanes is not None:
            return await self._lanes[0].run(work)
        return await self._engine_transaction(work)

    def _wrote(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.wrote()

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: picks dialect-specific upserts."""
        return self._dialect

    @property
    def safe_url(self) -> str:
        return self._url.render_as_string(hide_password=True)

    async def warn_if_pool_too_large(self, pool_size: int) -> None:
        """Postgres: log ``storage.pool_too_large`` when ``pool_size`` connections do not fit in
        what the server has left. For the long-lived server (``loopgate serve``) only: a CLI
        command or the migration child never fills its pool."""
        if self.engine is not None:
            from bot.storage._engine import check_pool_room

            await check_pool_room(self.engine, pool_size)

    def flush_before_close(self, flush: Callable[[], Awaitable[None]]) -> None:
        """``flush`` writes what a writer behind the runs holds (the usage rollup): awaited
        by :meth:`aclose` before the connections go."""
        self._flushes.append(flush)

    async def aclose(self) -> None:
        await self.trace_writer.flush()
        for flush in self._flushes:
            await flush()
        if self.checkpoints is not None:
            await self.checkpoints.aclose()
        if self._lanes is not None:
            for lane in dict.fromkeys(self._lanes):  # an in-memory database has one
                await lane.close()
        if self.engine is not None:
            await self.engine.dispose()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _passive_checkpoint(conn: Connection) -> tuple[int, int]:
    """Frames in the log and frames copied to the database file (-1 when not in WAL)."""
    _busy, frames, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
    return int(frames), int(copied)


def redact(url: str) -> str:
    """The URL with its password masked, also for strings SQLAlchemy cannot parse."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


async def open_database(
    url: str = DEFAULT_DATABASE_URL,
    *,
    schema: str | None = None,
    migrate_apart: bool = False,
    pool_size: int = POSTGRES_POOL_SIZE,
) -> Database:
    """Connect, migrate the schema to head and return the ready database.

    ``schema`` (Postgres only) puts every table, ``alembic_version`` included, in that schema,
    creating it when missing; the tests use it to isolate each test in a shared database.
    ``pool_size``: Postgres connections kept at most (``database.pool_size``).
    ``migrate_apart``: a database behind head (a first start, a new release) is migrated by a
    child process (``python -m bot.storage.migrate``), so Alembic, Mako and the migration
    scripts (~8 MiB that would stay resident) never load in this long-lived one
    (``loopgate serve``); an in-memory SQLite database, which a child can't see, is migrated
    here as always.
    Raises :class:`StorageError` when the URL is invalid or the database cannot be reached or
    migrated.
    """
    parsed = _parse(url)
    if schema is not None:
        if parsed.get_backend_name() != "postgresql":
            raise StorageError(f"schema= is only supported on Postgres, not {redact(url)}")
        if not _IDENTIFIER.fullmatch(schema):
            raise StorageError(f"invalid schema name {schema!r}")  # it is spliced into SQL
    try:
        db = _connect(parsed, schema, pool_size)
    except Exception as exc:  # e.g. an unwritable data directory, bad driver arguments
        raise StorageError(f"cannot open database {redact(url)}: {exc}") from exc
    apart = migrate_apart and not is_sqlite_memory(parsed)
    try:
        done, before, after = await db._before_start(
            partial(_migrate_to_head, schema=schema, apart=apart)
        )
        if not done:
            await _migrate_in_child(url, schema)
        elif before != after:
            log.info("storage.migrated", from_revision=before, to_revision=after)
    except Exception as exc:  # unreachable server, bad credentials, unknown revision, ...
        await db.aclose()
        raise StorageError(f"cannot open database {redact(url)}: {exc}") from exc
    log.info("storage.opened", url=db.safe_url, dialect=db.dialect, schema=schema)
    return db


def _connect(url: URL, schema: str | None, pool_size: int) -> Database:
    if url.get_backend_name() == "sqlite":
        if is_sqlite_memory(url):
            # Each new connection to :memory: is a new, empty database: one lane, one
            # connection, for the writes and the reads.
            lane = SqliteLane(url, sqlite_pragmas, "memory")
            return Database(url, lanes=(lane, lane))
        if url.database and not url.database.startswith("file:"):
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        lanes = (
            SqliteLane(url, sqlite_pragmas, "writes"),
            # Two readers: one long history does not hold up every other chat's.
            SqliteLane(url, sqlite_pragmas, "reads", threads=2),
        )
        return Database(url, lanes=lanes)
    from bot.storage._engine import create_engine  # SQLAlchemy's asyncio layer: Postgres only

    return Database(url, engine=create_engine(url, schema, pool_size=pool_size))


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StorageError(f"invalid database URL {redact(url)}: {exc}") from exc
    driver = _ASYNC_DRIVERS.get(parsed.drivername)
    if driver is not None:
        parsed = parsed.set(drivername=driver)
    if parsed.drivername not in _ASYNC_DRIVERS.values():
        raise StorageError(
            f"unsupported database URL {redact(url)}: use sqlite+aiosqlite:// or "
            "postgresql+asyncpg://"
        )
    return parsed


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config found from this package's location, so it works when installed."""
    from alembic.config import Config

    cfg = Config()
    # ConfigParser interpolation would choke on a "%" in the install path.
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str | None:
    """The head as Alembic computes it from the migrations folder (HEAD_REVISION must match)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _migrate_to_head(
    conn: Connection, *, schema: str | None, apart: bool
) -> tuple[bool, str | None, str | None]:
    """Bring the schema to head in ``conn``'s transaction: (done, revision before, after).
    Not done when it is behind and ``apart`` asks for a child to migrate it (the lock is
    released by then, for the child to take)."""
    # Two processes starting together must not both create the tables: take a lock held
    # until this transaction ends before reading the current revision.
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
    else:
        # The sqlite3 driver would run DDL outside any transaction; an explicit write
        # transaction makes the migration atomic and makes other openers wait (busy_timeout).
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    if schema is not None:
        exists = conn.scalar(
            text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
        )
        if not exists:  # checked first: a role without CREATE may use an existing schema
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    if _stored_revisions(conn) == [HEAD_REVISION]:
        return True, HEAD_REVISION, HEAD_REVISION  # the usual start: Alembic is not imported
    if apart:
        return False, None, None
    before = _current_revision(conn)
    _upgrade_to_head(conn)
    return True, before, _current_revision(conn)


async def _migrate_in_child(url: str, schema: str | None) -> None:
    """``python -m bot.storage.migrate``: the same migration under the same lock, in a child
    that exits when done. The URL goes through stdin, not the command line (``ps`` shows
    that)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.storage.migrate",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await child.communicate(json.dumps({"url": url, "schema": schema}).encode())
    if child.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() or [f"exit {child.returncode}"]
        raise RuntimeError(f"migration failed: {lines[-1]}")
    log.info("storage.migrated", to_revision=HEAD_REVISION, in_child=True)


def _stored_revisions(connection: Connection) -> list[str]:
    """The rows of ``alembic_version`` ([] when there is no such table), read without Alembic.

    Looked up through the search path on Postgres, so a ``schema=`` database sees its own."""
    if connection.dialect.name == "postgresql":
        query = "SELECT to_regclass('alembic_version') IS NOT NULL"
    else:
        query = (
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
        )
    if not connection.execute(text(query)).scalar():
        return []
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
    return [str(v) for v in rows]


def _upgrade_to_head(connection: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), "head")


def _current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()
