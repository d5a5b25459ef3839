"""SQLite's connection settings: the pragmas every connection of the lanes opens with."""

from __future__ import annotations

import random
import time
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.pool import ConnectionPoolEntry

SQLITE_BUSY_TIMEOUT_MS = 5_000
# Each connection's page cache, in KiB (SQLite's default is 2,000). Each connection keeps its
# own copy of the hot pages (six of them, ~2 MiB of a Telegram-only process's 100 MiB budget,
# when an async pool sat beside the lanes); the pages they drop stay in the OS page cache, a
# read away.
SQLITE_CACHE_KIB = 256
WAL_SWITCH_ATTEMPTS = 50


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


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
