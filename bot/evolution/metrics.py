"""Per-agent metrics from the ``traces`` and ``spans`` tables, aggregated in SQL.

Nothing here loads spans into Python: each figure is one grouped query over the window (runs
by status, tool calls per tool, repeated calls, latency percentiles with window functions),
so a cycle costs a handful of queries whatever the traffic. The same code runs on SQLite and
Postgres. Repeated calls rely on the ``args_hash`` attribute tool spans carry since the
evolution engine exists (older spans simply never count as repeats).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, case, distinct, func, literal, or_, select

from bot.evolution.records import AgentMetrics, ToolStats
from bot.storage import Database
from bot.storage.models import MemoryFileRow, SpanRow, TraceRow

MEMORY_SEARCH_TOOL = "memory_search"
TOOL_KINDS = ("tool", "async_tool")
FAILED_STATUSES = ("error", "failed")
CAPPED_STATUSES = ("max_iterations", "budget_exceeded")

_Rows = Sequence[Row[*tuple[Any, ...]]]


def _window(start: datetime, end: datetime, agent_id: str | None) -> list[ColumnElement[bool]]:
    where = [
        TraceRow.started_at >= start,
        TraceRow.started_at < end,
        TraceRow.status != "running",
    ]
    if agent_id is not None:
        where.append(TraceRow.agent_id == agent_id)
    return where


async def compute_metrics(
    db: Database, start: datetime, end: datetime, agent_id: str | None = None
) -> list[AgentMetrics]:
    """Metrics of every agent with finished runs in ``[start, end)`` (or of ``agent_id``
    only), ordered by agent id."""
    where = _window(start, end, agent_id)
    await db.trace_writer.flush()  # traces are written behind the runs
    runs, tools, (repeats, repeat_runs), latency = await db.run_read(
        partial(_read_window, where=where)
    )

    acc: dict[str, dict[str, Any]] = defaultdict(_empty)
    for agent, status, count, tokens_in, tokens_out in runs:
        a = acc[agent]
        a["runs"] += count
        a["input_tokens"] += int(tokens_in)
        a["output_tokens"] += int(tokens_out)
        if status == "completed":
            a["completed"] += count
        elif status == "cancelled":
            a["cancellations"] += count
        elif status in CAPPED_STATUSES:
            a["capped"] += count
        elif status in FAILED_STATUSES:
            a["failures"] += count
    for agent, name, calls, errors in tools:
        acc[agent]["tools"][name] = ToolStats(int(calls), int(errors or 0))
    for agent, name, extra in repeats:
        acc[agent]["repeated_by_tool"][name] = int(extra)
    for agent, count in repeat_runs:
        acc[agent]["runs_with_repeats"] = int(count)
    for agent, (p50, p95) in latency.items():
        acc[agent]["latency_p50_ms"], acc[agent]["latency_p95_ms"] = p50, p95
    out = []
    for agent in sorted(acc):
        a = acc[agent]
        memory = a["tools"].get(MEMORY_SEARCH_TOOL)
        out.append(
            AgentMetrics(
                agent_id=agent,
                window_start=start,
                window_end=end,
                repeated_tool_calls=sum(a["repeated_by_tool"].values()),
                memory_search_calls=memory.calls if memory else 0,
                **a,
            )
        )
    return out


def _read_window(
    conn: Connection, where: list[ColumnElement[bool]]
) -> tuple[
    _Rows,
    _Rows,
    tuple[_Rows, _Rows],
    dict[str, tuple[float, float]],
]:
    """Every query of :func:`compute_metrics`, in one read."""
    runs = conn.execute(
        select(
            TraceRow.agent_id,
            TraceRow.status,
            func.count(),
            func.coalesce(func.sum(TraceRow.input_tokens), 0),
            func.coalesce(func.sum(TraceRow.output_tokens), 0),
        )
        .where(*where)
        .group_by(TraceRow.agent_id, TraceRow.status)
    ).all()
    tools = conn.execute(_tool_query(where)).all()
    return runs, tools, _repeats(conn, where), _latency(conn, where)


def _empty() -> dict[str, Any]:
    return {
        "runs": 0,
        "completed": 0,
        "failures": 0,
        "cancellations": 0,
        "capped": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "tools": {},
        "repeated_by_tool": {},
        "runs_with_repeats": 0,
        "latency_p50_ms": 0.0,
        "latency_p95_ms": 0.0,
    }


def _tool_query(where: list[ColumnElement[bool]]) -> Any:
    errors = func.sum(case((SpanRow.error.is_(True), 1), else_=0))
    return (
        select(TraceRow.agent_id, SpanRow.name, func.count(), errors)
        .select_from(SpanRow)
        .join(TraceRow, SpanRow.trace_id == TraceRow.id)
        .where(*where, SpanRow.kind.in_(TOOL_KINDS))
        .group_by(TraceRow.agent_id, SpanRow.name)
    )


def _repeats(conn: Connection, where: list[ColumnElement[bool]]) -> tuple[_Rows, _Rows]:
    """Per agent and tool: calls beyond the first of each (run, tool, arguments) group; and
    per agent: how many runs had any."""
    args_hash = SpanRow.attributes["args_hash"].as_string()
    groups = (
        select(
            TraceRow.agent_id.label("agent_id"),
            SpanRow.trace_id.label("trace_id"),
            SpanRow.name.label("name"),
            func.count().label("n"),
        )
        .select_from(SpanRow)
        .join(TraceRow, SpanRow.trace_id == TraceRow.id)
        .where(*where, SpanRow.kind.in_(TOOL_KINDS), args_hash.is_not(None))
        .group_by(TraceRow.agent_id, SpanRow.trace_id, SpanRow.name, args_hash)
        .having(func.count() > 1)
        .subquery()
    )
    by_tool = conn.execute(
        select(groups.c.agent_id, groups.c.name, func.sum(groups.c.n - literal(1))).group_by(
            groups.c.agent_id, groups.c.name
        )
    ).all()
    runs = conn.execute(
        select(groups.c.agent_id, func.count(distinct(groups.c.trace_id))).group_by(
            groups.c.agent_id
        )
    ).all()
    return by_tool, runs


def _latency(conn: Connection, where: list[ColumnElement[bool]]) -> dict[str, tuple[float, float]]:
    """Nearest-rank p50 and p95 of run durations (the root span's), cancelled runs left out.
    Integer arithmetic for the ranks: ceil(0.5n) = (n+1)/2, ceil(0.95n) = (95n+99)/100."""
    ranked = (
        select(
            TraceRow.agent_id.label("agent_id"),
            SpanRow.duration_ms.label("ms"),
            func.row_number()
            .over(partition_by=TraceRow.agent_id, order_by=SpanRow.duration_ms)
            .label("rn"),
            func.count().over(partition_by=TraceRow.agent_id).label("cnt"),
        )
        .select_from(SpanRow)
        .join(TraceRow, SpanRow.trace_id == TraceRow.id)
        .where(*where, SpanRow.position == 0, TraceRow.status != "cancelled")
        .subquery()
    )
    p50_rank = (ranked.c.cnt + 1) // 2
    p95_rank = (ranked.c.cnt * 95 + 99) // 100
    rows = conn.execute(
        select(
            ranked.c.agent_id, ranked.c.ms, ranked.c.rn == p50_rank, ranked.c.rn == p95_rank
        ).where(or_(ranked.c.rn == p50_rank, ranked.c.rn == p95_rank))
    ).all()
    out: dict[str, list[float]] = {}
    for agent, ms, is_p50, is_p95 in rows:
        pair = out.setdefault(agent, [0.0, 0.0])
        if is_p50:
            pair[0] = float(ms)
        if is_p95:
            pair[1] = float(ms)
    return {agent: (p50, p95) for agent, (p50, p95) in out.items()}


async def memory_file_count(db: Database, workspace_base: str) -> int:
    """Memory files (MEMORY.md, memory/*.md) indexed under ``workspace_base``: whether an
    agent's users have anything ``memory_search`` could find."""
    prefix = workspace_base.rstrip("/\\")
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    under = MemoryFileRow.workspace_key.like(escaped + "/%", escape="\\")
    query = (
        select(func.count())
        .select_from(MemoryFileRow)
        .where(or_(MemoryFileRow.workspace_key == prefix, under))
    )
    count = await db.run_read(lambda conn: conn.execute(query).scalar())
    return int(count or 0)
