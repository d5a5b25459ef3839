"""The child that migrates a database for a process that keeps Alembic out of its memory.

``open_database(url, migrate_apart=True)`` (``loopgate serve``) runs ``python -m
bot.storage.migrate`` when the database is behind head, with ``{"url", "schema"}`` as JSON on
stdin: this opens it the usual way (the lock, the check, Alembic's upgrade) and exits 0, or
prints the reason and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import sys

from bot.storage._db import open_database
from bot.storage._errors import StorageError


async def migrate(url: str, schema: str | None) -> None:
    db = await open_database(url, schema=schema)
    await db.aclose()


def main() -> int:
    given = json.loads(sys.stdin.read())
    try:
        asyncio.run(migrate(given["url"], given.get("schema")))
    except StorageError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
