"""``loopgate traces``: recent run traces from the database, printed as trees.

A run that spawned or delegated to other agents is printed with their runs nested under the
tool span that started each one, recursively (up to :data:`MAX_DEPTH` levels below the top
run), so one tree shows everything a message caused.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from agent_core.tracing import Trace, render_tree
from bot.cli.database import with_database
from bot.config import Config
from bot.storage import Database, SqlTraceStore

MAX_DEPTH = 5


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


async def child_traces(
    store: SqlTraceStore, parents: Sequence[Trace], *, depth: int = MAX_DEPTH
) -> dict[str, list[Trace]]:
    """The runs started by ``parents`` and by their children, ``depth`` levels down, keyed by
    the span that started each (what :func:`render_tree` takes). A child whose span is not in
    its parent's trace (e.g. the parent was cut short) goes under the parent's root span."""
    by_span: dict[str, list[Trace]] = {}
    seen = {t.id for t in parents}
    level = list(parents)
    for _ in range(depth):
        found = [t for t in await store.children_of([p.id for p in level]) if t.id not in seen]
        if not found:
            break
        by_id = {p.id: p for p in level}
        for child in found:
            seen.add(child.id)
            parent = by_id[child.parent_trace_id or ""]
            spans = {s.id for s in parent.spans}
            key = child.parent_span_id if child.parent_span_id in spans else None
            if key is None and parent.spans:
                key = parent.root.id
            if key is not None:
                by_span.setdefault(key, []).append(child)
        level = found
    return by_span
