"""``loopgate traces``: recent run traces from the database, printed as trees."""

from __future__ import annotations

import sys
from typing import TextIO

from agent_core.tracing import render_tree
from bot.config import Config
from bot.storage import SqlTraceStore, open_database
from bot.storage.errors import StorageError


async def print_traces(
    config: Config, *, session: str | None = None, last: int = 10, out: TextIO = sys.stdout
) -> int:
    """Print the ``last`` newest traces (of one session when given); returns the exit code."""
    try:
        db = await open_database(config.database.url)
    except StorageError as exc:
        print(f"loopgate: {exc}", file=sys.stderr)
        return 2
    try:
        traces = await SqlTraceStore(db).recent_traces(session_key=session, limit=last)
    finally:
        await db.aclose()
    if not traces:
        where = f" for session {session}" if session else ""
        print(f"no traces{where}", file=out)
        return 0
    for trace in traces:
        print("\n".join(render_tree(trace)), file=out)
        print(file=out)
    return 0
