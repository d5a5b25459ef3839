"""Building the engine: the pool and connection settings of each dialect (SQLite's pragmas,
Postgres' pool, its liveness check at checkout and its room on the server)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from bot.storage._sql import dump_json

log = structlog.get_logger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 5_000
# Each connection's page cache, in KiB (SQLite's default is 2,000). Six connections (the lanes'
# three, the engine's pool) each kept their own copy of the hot pages, ~2 MiB of a Telegram-only
# process's 100 MiB budget; the pages they drop stay in the OS page cache, a read away.
SQLITE_CACHE_KIB = 256
WAL_SWITCH_ATTEMPTS = 50
POSTGRES_CONNECT_TIMEOUT_S = 10
# Up to 15 connections per process, as SQLAlchemy's default (5 + 10), and all of them kept
# (database.pool_size, no overflow): a connection beyond the kept ones is closed when it is
# returned, so a load that needs a few more than the kept ones opens and closes connections all
# the time, and a new Postgres backend costs both sides a fork, authentication and a cold
# catalog and statement cache (10 kept + 5 overflow opened one connection per eight replies
# for three processes under 40 chats at once; docs/scaling.md, "Stop 41").
POSTGRES_POOL_SIZE = 15


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def create_engine(
    url: URL, schema: str | None, *, pool_size: int = POSTGRES_POOL_SIZE
) -> AsyncEngine:
    kwargs: dict[str, Any] = {
        "json_serializer": dump_json,
    }
    if url.get_backend_name() == "sqlite":
        if is_sqlite_memory(url):
            # Each new connection to :memory: is a new, empty database: share one.
            kwargs["poolclass"] = StaticPool
        else:
            if url.database and not url.database.startswith("file:"):
                Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            # Writers are queued by Database.write(); a few connections let reads go on
            # meanwhile (WAL), and busy_timeout covers writers in other processes.
            kwargs.update(pool_size=5, max_overflow=5)
    else:
        # Fail start-up within seconds on an unreachable host instead of asyncpg's 60 s.
        connect_args: dict[str, Any] = {"timeout": POSTGRES_CONNECT_TIMEOUT_S}
        if schema is not None:
            connect_args["server_settings"] = {"search_path": schema}
        kwargs.update(pool_size=pool_size, max_overflow=0, connect_args=connect_args)
    engine = create_async_engine(url, **kwargs)
    if url.get_backend_name() == "sqlite":
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
    else:
        event.listen(engine.sync_engine, "checkout", _replace_if_closed)
    return engine


_ROOM = text(
    "SELECT current_setting('max_connections')::int,"
    " current_setting('superuser_reserved_connections')::int,"
    " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
)


def pool_room_warning(pool_size: int, max_connections: int, reserved: int, in_use: int) -> str:
    """Why ``pool_size`` more connections may not fit on the server ("" when they do).

    ``in_use`` counts every client's connections, the one asking included (it is the pool's
    own); each further process of a cluster wants its own ``pool_size`` on top."""
    free = max_connections - reserved - in_use + 1
    if pool_size <= free:
        return ""
    return (
        f"database.pool_size {pool_size} is more than the {free} connections the server has "
        f"room for (max_connections {max_connections}, {reserved} reserved, {in_use} in use): "
        "under load, queries will fail with 'too many clients'; lower database.pool_size or "
        "raise max_connections (each process of a cluster keeps its own pool)"
    )


async def check_pool_room(engine: AsyncEngine, pool_size: int) -> None:
    """Log ``storage.pool_too_large`` at start-up when the Postgres server can't take the pool
    (a full pool is reached only under load, long after start-up, and fails there)."""
    try:
        async with engine.connect() as conn:
            max_connections, reserved, in_use = (await conn.execute(_ROOM)).one()
    except Exception as exc:  # a role that can't read the settings: nothing to say
        log.debug("storage.pool_room_unknown", error=str(exc))
        return
    warning = pool_room_warning(pool_size, max_connections, reserved, in_use)
    if warning:
        log.warning("storage.pool_too_large", detail=warning, pool_size=pool_size)


def _replace_if_closed(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
    """Replace a pooled connection the server has closed (a restart, an idle timeout) instead
    of failing the request that would get it.

    ``pool_pre_ping`` did that with a round trip per checkout, three on asyncpg (``BEGIN``,
    ``;``, ``ROLLBACK``): a tenth of a cluster process's CPU. asyncpg notices a server's close
    by itself, while the connection waits in the pool, so asking it costs nothing. Raising
    ``DisconnectionError`` makes the pool discard the connection and hand out another.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


def sqlite_pragmas(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    # WAL lets readers run while the bot writes; foreign_keys is off by default in SQLite and
    # the ON DELETE CASCADE constraints need it; busy_timeout makes a second writer wait for
    # the lock instead of failing at once with "database is locked".
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")
        # NORMAL is durable in WAL mode except for the last commits on power loss (not on a
        # process crash), and saves an fsync per transaction.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints run in the background (checkpoints.py), not inside a reply's commit.
        cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch to WAL (persistent) unless already done.

    The switch wants an exclusive lock, and when several openers of a new database try it at
    once SQLite refuses it at once ("database is locked") instead of waiting busy_timeout, to
    avoid a deadlock. So: retry for a moment, and stop as soon as someone else switched it.
    Only a brand-new database file ever gets here more than once.
    """
    for attempt in range(WAL_SWITCH_ATTEMPTS):
        cursor.execute("PRAGMA journal_mode")
        if str(cursor.fetchone()[0]).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except Exception:
            if attempt == WAL_SWITCH_ATTEMPTS - 1:
                raise
            time.sleep(0.01 + random.random() * 0.02)  # sync connect hook: start-up only
