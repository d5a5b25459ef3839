"""Postgres' engine: SQLAlchemy's async engine on asyncpg, its pool, its liveness check at
checkout and its room on the server. Imported only for a Postgres URL: SQLite runs on the lanes
(``_lane.py``) without the asyncio extension and the ORM it imports."""

from __future__ import annotations

from typing import Any

import structlog
from sqlalchemy import event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from bot.storage._sql import dump_json

log = structlog.get_logger(__name__)

POSTGRES_CONNECT_TIMEOUT_S = 10


def create_engine(url: URL, schema: str | None, *, pool_size: int) -> AsyncEngine:
    """The engine of a ``postgresql+asyncpg`` URL; ``schema`` becomes the search path."""
    # Fail start-up within seconds on an unreachable host instead of asyncpg's 60 s.
    connect_args: dict[str, Any] = {"timeout": POSTGRES_CONNECT_TIMEOUT_S}
    if schema is not None:
        connect_args["server_settings"] = {"search_path": schema}
    engine = create_async_engine(
        url,
        json_serializer=dump_json,
        pool_size=pool_size,
        max_overflow=0,
        connect_args=connect_args,
    )
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
