"""``loopgate traces``: recent run traces from the database, printed as trees."""

from __future__ import annotations

import sys
from typing import TextIO

from agent_core.tracing import Trace, render_tree
from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database, SqlTraceStore


async def print_traces(
    config: Config, *, session: str | None = None, last: int = 10, out: TextIO = sys.stdout
) -> int:
    """Print the ``last`` newest traces (of one session when given); returns the exit code."""
    traces: list[Trace] = []

    async def act(db: Database) -> int:
        traces.extend(await SqlTraceStore(db).recent_traces(session_key=session, limit=last))
        return 0

    if code := await with_database(config, act):
        return code
    if not traces:
        where = f" for session {session}" if session else ""
        print(f"no traces{where}", file=out)
        return 0
    for trace in traces:
        print("\n".join(render_tree(trace)), file=out)
        print(file=out)
    return 0
