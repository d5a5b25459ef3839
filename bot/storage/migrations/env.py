"""Alembic environment.

At run time ``open_database`` runs ``command.upgrade`` with a connection in a transaction (a
SQLite lane's, or the sync facade of Postgres' async connection) and hands it over in
``config.attributes["connection"]``; the migration then runs in that transaction. The
``alembic`` command line (developers only) has no connection, so one is opened here from
``LOOPGATE_DATABASE_URL`` or ``-x url=...``.

``logging.config.fileConfig`` is deliberately not called: it would replace the application's
logging configuration every time the bot starts.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from bot.storage.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


def _cli_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get(
        "LOOPGATE_DATABASE_URL"
    )
    if not url:
        raise SystemExit("set LOOPGATE_DATABASE_URL or pass -x url=... to run alembic directly")
    return url


async def _run_cli() -> None:
    engine = create_async_engine(_cli_url())
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def main() -> None:
    if context.is_offline_mode():
        context.configure(url=_cli_url(), target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_cli())


main()
