"""Fixtures for code that runs on both database backends (a pytest plugin, see conftest.py).

``backend`` / ``db`` run a test on SQLite and, when LOOPGATE_TEST_POSTGRES_URL is set, on
Postgres; each Postgres test gets a fresh schema, dropped afterwards, so tests stay isolated
and can share one database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Connection

from bot.storage import Database, open_database

PG_URL = os.environ.get("LOOPGATE_TEST_POSTGRES_URL", "")


@dataclass
class Backend:
    name: str
    url: str
    schema: str | None = None

    async def open(self) -> Database:
        return await open_database(self.url, schema=self.schema)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres",
            marks=pytest.mark.skipif(
                not PG_URL,
                reason="set LOOPGATE_TEST_POSTGRES_URL=postgresql+asyncpg://user:pw@host/db",
            ),
        ),
    ]
)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite+aiosqlite:///{tmp_path}/data/loopgate.db")
        return
    backend = Backend("postgres", PG_URL, schema=f"test_{uuid.uuid4().hex[:16]}")
    yield backend
    assert backend.schema is not None
    async with await backend.open() as db:
        await drop_schema(db, backend.schema)


async def drop_schema(db: Database, schema: str, *, if_exists: bool = False) -> None:
    """``DROP SCHEMA`` (Postgres) with everything in it, in a transaction of its own."""
    if_clause = "IF EXISTS " if if_exists else ""

    def drop(conn: Connection) -> None:
        conn.exec_driver_sql(f'DROP SCHEMA {if_clause}"{schema}" CASCADE')

    await db.run_write(drop)


@pytest.fixture
async def db(backend: Backend) -> AsyncIterator[Database]:
    async with await backend.open() as database:
        yield database
