"""Seeding the traces/spans tables with runs for the evolution tests, in one transaction per
call (bulk INSERTs: hundreds of runs per test stay fast on both backends)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert

from agent_core.tracing import arguments_digest
from bot.config import Config, parse_config
from bot.storage import Database
from bot.storage.models import MemoryFileRow, SpanRow, TraceRow


@dataclass(frozen=True)
class Call:
    """One tool call of a seeded run."""

    name: str
    error: bool = False
    args: str = "{}"


def hours_ago(hours: float) -> datetime:
    return datetime.now(UTC) - timedelta(hours=hours)


async def seed_runs(
    db: Database,
    n: int,
    *,
    agent_id: str = "main",
    status: str = "completed",
    calls: Sequence[Call] = (),
    at: datetime | None = None,
    duration_ms: float | Sequence[float] = 100.0,
    tokens: tuple[int, int] = (10, 5),
    parent_trace_id: str | None = None,
) -> list[str]:
    """``n`` finished runs of ``agent_id``, each making ``calls``; returns their trace ids."""
    started = at or hours_ago(1)
    traces: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    ids = []
    for i in range(n):
        trace_id = uuid.uuid4().hex
        ids.append(trace_id)
        ms = duration_ms if isinstance(duration_ms, int | float) else duration_ms[i]
        traces.append(
            {
                "id": trace_id,
                "run_id": f"run-{trace_id[:8]}",
                "session_key": f"agent:{agent_id}:web:direct:chat-{i}",
                "agent_id": agent_id,
                "status": status,
                "started_at": started,
                "ended_at": started + timedelta(milliseconds=ms),
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
                "error": None,
                "output_preview": "",
                "input_preview": None,
                "parent_trace_id": parent_trace_id,
                "parent_span_id": None,
            }
        )
        root = uuid.uuid4().hex
        spans.append(_span(trace_id, 0, root, None, "agent", agent_id, started, ms, False, {}))
        for position, c in enumerate(calls, start=1):
            attributes = {"id": f"call-{position}", "args_hash": arguments_digest(c.args)}
            spans.append(
                _span(
                    trace_id,
                    position,
                    uuid.uuid4().hex,
                    root,
                    "tool",
                    c.name,
                    started,
                    5.0,
                    c.error,
                    attributes,
                )
            )
    await db.run_write(partial(_insert_runs, traces=traces, spans=spans))
    return ids


def _insert_runs(
    conn: Connection, traces: list[dict[str, Any]], spans: list[dict[str, Any]]
) -> None:
    if traces:
        conn.execute(insert(TraceRow), traces)
    if spans:
        conn.execute(insert(SpanRow), spans)


def _span(
    trace_id: str,
    position: int,
    span_id: str,
    parent: str | None,
    kind: str,
    name: str,
    started: datetime,
    ms: float,
    error: bool,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": span_id,
        "trace_id": trace_id,
        "position": position,
        "parent_id": parent,
        "kind": kind,
        "name": name,
        "started_at": started,
        "duration_ms": ms,
        "error": error,
        "attributes": attributes,
    }


async def seed_memory_files(db: Database, workspace: Path, count: int) -> None:
    """Memory files indexed in ``count`` user workspaces under ``workspace``."""
    rows = [
        {
            "workspace_key": str((workspace / f"user-{i}").resolve()),
            "path": "MEMORY.md",
            "mtime_ns": 1,
            "size": 10,
            "indexed_at": datetime.now(UTC),
        }
        for i in range(count)
    ]
    await db.run_write(lambda conn: conn.execute(insert(MemoryFileRow), rows))


async def seed_failing_read_file(db: Database) -> None:
    """100 runs of ``main`` calling ``read_file``, 40 of them failing (ToolFailureRule's case)."""
    await seed_runs(db, 40, calls=[Call("read_file", error=True, args='{"path": "x"}')])
    await seed_runs(db, 60, calls=[Call("read_file", args='{"path": "y"}')])


def evolution_config(tmp_path: Path, **agents: Any) -> Config:
    """Defaults plus ``agents`` keys (``defaults={...}``, ``main={...}``), workspaces and the
    database in ``tmp_path`` (the database URL is only used by the CLI tests)."""
    data: dict[str, Any] = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'loopgate.db'}"},
        "agents": {"defaults": {"workspace": str(tmp_path / "workspaces")}},
    }
    for key, value in agents.items():
        if key == "defaults":
            data["agents"]["defaults"].update(value)
        else:
            data["agents"][key] = value
    return parse_config(data, {})
