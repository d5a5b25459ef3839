"""``loopgate traces``: recent run traces from the database, printed as trees.

A run that spawned or delegated to other agents is printed with their runs nested under the
tool span that started each one, recursively (up to :data:`MAX_DEPTH` levels below the top
run), so one tree shows everything a message caused.
"""

from __future__ import annotations

import sys
from typing import TextIO

from agent_core import Trace, render_tree
from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database, SqlTraceStore
from bot.storage.traces import child_traces


async def print_traces(
    config: Config, *, session: str | None = None, last: int = 10, out: TextIO | None = None
) -> int:
    """Print the ``last`` newest traces (of one session when given); returns the exit code."""
    out = out or sys.stdout  # looked up per call: tests and embedders swap sys.stdout
    traces: list[Trace] = []
    children: dict[str, list[Trace]] = {}

    async def act(db: Database) -> int:
        store = SqlTraceStore(db)
        traces.extend(await store.recent_traces(session_key=session, limit=last))
        children.update(await child_traces(store, traces))
        return 0

    if code := await with_database(config, act):
        return code
    if not traces:
        where = f" for session {session}" if session else ""
        print(f"no traces{where}", file=out)
        return 0
    for trace in traces:
        print("\n".join(render_tree(trace, children)), file=out)
        print(file=out)
    return 0
