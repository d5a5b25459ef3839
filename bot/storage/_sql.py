"""Small helpers that keep SQLite and Postgres behaving the same."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite

from bot.storage.db import Database

NUL_REPLACEMENT = "\ufffd"


def upsert_insert(db: Database, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that has ``on_conflict_do_update/nothing``; both dialects spell them alike."""
    if db.dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def clean(text: str) -> str:
    """Postgres text cannot hold NUL; replace it on SQLite too so both store the same string."""
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean(text)
