"""Opening the database for a one-shot command: a clear line and exit code 2 when it can't."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from bot.config import Config
from bot.storage import Database, StorageError, open_database


async def with_database(
    config: Config, action: Callable[[Database], Awaitable[int]], err: TextIO | None = None
) -> int:
    """Run ``action`` on the configured database and close it; its result is the exit code."""
    try:
        db = await open_database(config.database.url)
    except StorageError as exc:
        print(f"loopgate: {exc}", file=err or sys.stderr)
        return 2
    try:
        return await action(db)
    finally:
        await db.aclose()
