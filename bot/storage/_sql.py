"""Small helpers that keep SQLite and Postgres behaving the same."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Table

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

    from bot.storage._table import TableRow


class Dialected(Protocol):
    """A database that names its dialect (:class:`bot.storage._db.Database`)."""

    @property
    def dialect(self) -> str: ...


NUL_REPLACEMENT = "\ufffd"


def dump_json(value: Any) -> str:
    """JSON columns' serializer (both engines): span attributes may hold datetimes or other
    non-JSON values."""
    return json.dumps(value, ensure_ascii=False, default=str)


def upsert_insert(db: Dialected, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that has ``on_conflict_do_update/nothing``; both dialects spell them alike."""
    return dialect_insert(db.dialect, table)


def dialect_insert(dialect: str, table: Any) -> postgresql.Insert | sqlite.Insert:
    """:func:`upsert_insert` by dialect name, for statements built once (``functools.cache``)
    and executed with a parameter dict: on the reply path, building a statement and computing
    its cache key cost SQLAlchemy about as much as SQLite takes to run it."""
    # Imported here, so only the configured dialect loads: Postgres' keeps ~2 MiB resident
    # (its catalog, types and asyncpg glue) that a SQLite deployment never uses.
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def table_of(model: type[TableRow]) -> Table:
    """A table class's Core :class:`Table` (``bot/storage/_table.py``), for statements that
    list its columns (``TABLE.c``) or are built once."""
    return model.__table__


def clean(text: str) -> str:
    """Postgres text cannot hold NUL; replace it on SQLite too so both store the same string."""
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean(text)
