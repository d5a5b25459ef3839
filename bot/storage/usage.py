"""The ``usage_hourly`` table: model usage added up per UTC hour by agent, channel, user and
model (docs/usage.md).

Every model call adds to one row (:meth:`SqlUsage.add`), written behind the runs like the
traces: increments wait in memory for up to a second (:data:`WRITE_DELAY`), those of one row
are merged, and one task upserts whatever has gathered in one transaction. Readers here flush
first, so within the process a call is counted once ``add`` has returned; another process (the
CLI) sees it within the delay. A busy month stays small: one row per hour and active (agent,
channel, user, model), however many calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

import structlog
from sqlalchemy import Connection, Executable, func, select

from bot.storage._db import Database
from bot.storage._sql import dialect_insert, table_of
from bot.storage.models import UsageHourRow

log = structlog.get_logger(__name__)

Dimension = Literal["agent", "channel", "user", "model"]
DIMENSIONS: tuple[Dimension, ...] = ("agent", "channel", "user", "model")
_COLUMN = {"agent": "agent_id", "channel": "channel", "user": "user_id", "model": "model"}
_TABLE = table_of(UsageHourRow)


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True, slots=True)
class UsageKey:
    hour: datetime
    agent_id: str
    channel: str
    user_id: str
    provider: str
    model: str


@dataclass(slots=True)
class UsageTotals:
    """Tokens, cost and runs of some calls. ``cost_usd`` is None when none of them was priced
    (a model of unknown price costs null, not 0); ``unpriced_calls`` says how many were not."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None
    runs: int = 0
    calls: int = 0
    unpriced_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: UsageTotals) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
        self.runs += other.runs
        self.calls += other.calls
        self.unpriced_calls += other.unpriced_calls

    def as_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.cost_usd is not None:
            data["cost_usd"] = round(self.cost_usd, 6)
        return data

    @classmethod
    def of_call(
        cls, input_tokens: int, output_tokens: int, cached: int, cost: float | None, run: bool
    ) -> UsageTotals:
        return cls(
            input_tokens,
            output_tokens,
            cached,
            cost,
            runs=int(run),
            calls=1,
            unpriced_calls=int(cost is None),
        )


@dataclass(slots=True)
class UsageRow:
    """One group of a breakdown: ``key`` is the agent, channel, user or model (or a day)."""

    key: str
    totals: UsageTotals = field(default_factory=UsageTotals)

    def as_dict(self, name: str) -> dict[str, Any]:
        return {name: self.key, **self.totals.as_dict()}


@cache
def _upsert(dialect: str) -> Executable:
    stmt = dialect_insert(dialect, _TABLE)
    summed = (
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "cost_usd",
        "runs",
        "calls",
        "unpriced_calls",
    )
    return stmt.on_conflict_do_update(
        index_elements=list(_TABLE.primary_key.columns),
        set_={name: _TABLE.c[name] + stmt.excluded[name] for name in summed},
    )


WRITE_DELAY = 1.0
"""Seconds increments gather before they are written (readers here flush at once). A write of
its own per reply would cost each reply a transaction (~0.8 ms of CPU on SQLite); gathered,
a second of replies shares one."""


class SqlUsage:
    """Adds usage up (behind the runs) and answers what was used when, by whom."""

    def __init__(self, db: Database, *, delay: float = WRITE_DELAY) -> None:
        self._db = db
        self._delay = delay
        self._pending: dict[UsageKey, UsageTotals] = {}
        self._task: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self._now = asyncio.Event()  # a reader waits: write without waiting out the delay
        db.flush_before_close(self.flush)

    def add(self, key: UsageKey, usage: UsageTotals) -> None:
        """Count ``usage`` in ``key``'s row; written behind the caller."""
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = UsageTotals()
            pending = self._pending[key]
        pending.add(usage)
        if self._task is None or self._task.done():
            self._done, self._now = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="usage:write")

    async def flush(self) -> None:
        """Return once everything added before this call is written (or failed to be)."""
        task = self._task
        if task is not None and not task.done():
            self._now.set()
            await asyncio.shield(self._done.wait())

    async def _drain(self) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._now.wait(), self._delay)
            while self._pending:
                batch, self._pending = self._pending, {}
                rows = [_row(key, totals) for key, totals in batch.items()]
                try:
                    await self._db.run_write(_writer(self._db.dialect, rows))
                except Exception:  # like a lost trace: logged, the run is not failed for it
                    log.exception("usage.save_failed", rows=len(rows))
        finally:
            self._done.set()

    # -- reading -------------------------------------------------------------------------------

    async def total(
        self,
        *,
        since: datetime,
        until: datetime | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
    ) -> UsageTotals:
        """Everything used in ``[since, until)`` (whole hours), maybe of one agent or user."""
        rows = await self.breakdown(since=since, until=until, agent_id=agent_id, user_id=user_id)
        return _sum(row.totals for row in rows)

    async def breakdown(
        self,
        *,
        since: datetime,
        until: datetime | None = None,
        by: Dimension | Literal["day"] | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
    ) -> list[UsageRow]:
        """Usage in ``[since, until)`` grouped ``by`` a dimension or by UTC day (one row "" when
        None), largest cost first (days: in order)."""
        await self.flush()
        t = _TABLE
        if by == "day":
            # Grouped by hour in SQL, then by day here: dates are spelled differently by
            # each dialect, hours are plain timestamps on both.
            group: Any = t.c.hour
        elif by is None:
            group = None
        else:
            group = t.c[_COLUMN[by]]
        columns = [
            func.sum(t.c.input_tokens),
            func.sum(t.c.output_tokens),
            func.sum(t.c.cached_input_tokens),
            func.sum(t.c.cost_usd),
            func.sum(t.c.runs),
            func.sum(t.c.calls),
            func.sum(t.c.unpriced_calls),
        ]
        query = select(*([group] if group is not None else []), *columns).where(
            t.c.hour >= hour_of(since)
        )
        if until is not None:
            query = query.where(t.c.hour < until)
        if agent_id is not None:
            query = query.where(t.c.agent_id == agent_id)
        if user_id is not None:
            query = query.where(t.c.user_id == user_id)
        if group is not None:
            query = query.group_by(group)

        def read(conn: Connection) -> list[Any]:
            return list(conn.execute(query))

        result = await self._db.run_read(read)
        rows: dict[str, UsageRow] = {}
        for record in result:
            values = list(record)
            label = "" if group is None else values.pop(0)
            if by == "day":
                label = _as_utc(label).date().isoformat()
            totals = _totals(values)
            if totals.calls == 0:
                continue
            rows.setdefault(str(label), UsageRow(str(label))).totals.add(totals)
        ordered = list(rows.values())
        if by == "day":
            ordered.sort(key=lambda row: row.key)
        else:
            ordered.sort(key=lambda row: (-(row.totals.cost_usd or 0.0), -row.totals.tokens))
        return ordered


def _writer(dialect: str, rows: list[dict[str, Any]]) -> Callable[[Connection], None]:
    statement = _upsert(dialect)

    def write(conn: Connection) -> None:
        conn.execute(statement, rows)

    return write


def _row(key: UsageKey, totals: UsageTotals) -> dict[str, Any]:
    return {
        "hour": key.hour,
        "agent_id": key.agent_id[:64],
        "channel": key.channel[:32],
        "user_id": key.user_id[:255],
        "provider": key.provider[:64],
        "model": key.model[:128],
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cached_input_tokens": totals.cached_input_tokens,
        "cost_usd": totals.cost_usd or 0.0,
        "runs": totals.runs,
        "calls": totals.calls,
        "unpriced_calls": totals.unpriced_calls,
    }


def _totals(values: Sequence[Any]) -> UsageTotals:
    inputs, outputs, cached, cost, runs, calls, unpriced = (v or 0 for v in values)
    priced = int(calls) - int(unpriced)
    return UsageTotals(
        int(inputs),
        int(outputs),
        int(cached),
        float(cost) if priced > 0 else None,
        int(runs),
        int(calls),
        int(unpriced),
    )


def _sum(totals: Iterable[UsageTotals]) -> UsageTotals:
    result = UsageTotals()
    for item in totals:
        result.add(item)
    return result


def _as_utc(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite hands back text for a grouped timestamp
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
