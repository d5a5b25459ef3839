"""Running the evolution cycle on ``evolution.schedule``.

One asyncio task waits for the next due time and starts the cycle as a task of its own (one at
a time: a cycle still running when the next is due is skipped, logged), so shutting down
cancels and awaits exactly those two tasks. A cron expression is croniter's, in UTC, with
crontab's meaning (Sunday is 0 or 7), as for the ``cron`` tool's jobs; an interval counts from
when the schedule started.

The wait is checked against the wall clock at least every minute: asyncio's clock stops while
the machine is suspended, the wall clock does not. Occurrences missed meanwhile become one run
when the latest of them is at most :data:`MISFIRE_GRACE` late, none when older (logged).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import structlog
from pydantic import TypeAdapter

from agent_core import cancel_and_wait
from bot.config.base import Duration
from bot.config.evolution import schedule_kind

log = structlog.get_logger(__name__)

MISFIRE_GRACE = 3600.0
"""How late (seconds) a due cycle may still start, e.g. after a suspended laptop wakes."""
RECHECK = 60.0
"""The longest single wait before the wall clock is read again."""
_GRIDS = {"daily": (86_400, 3 * 3600), "hourly": (3600, 0)}
"""The named schedules (``NAMED_SCHEDULES``: 03:00 UTC daily, minute 0 hourly) as a period and
an offset on the epoch's grid (UTC has no daylight saving): the default schedule needs no
croniter (~1 MiB resident) in a process that has no cron job."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def next_fire(schedule: str, after: datetime, *, start: datetime | None = None) -> datetime:
    """The first due time of ``schedule`` strictly after ``after`` (aware, UTC); an interval
    is on the grid of ``start`` (default ``after``)."""
    if grid := _GRIDS.get(schedule.strip()):
        period, offset = grid
        steps = math.floor(((after - _EPOCH).total_seconds() - offset) / period) + 1
        return _EPOCH + timedelta(seconds=steps * period + offset)
    kind, value = schedule_kind(schedule)
    if kind == "interval":
        step = TypeAdapter(Duration).validate_python(value)
        origin = start or after
        if after < origin:
            return origin + timedelta(seconds=step)
        steps = math.floor((after - origin).total_seconds() / step) + 1
        return origin + timedelta(seconds=step * steps)
    from croniter import croniter  # with the first cron schedule, not at import

    fire: datetime = croniter(value, after.astimezone(UTC)).get_next(datetime)
    return fire.astimezone(UTC)


class CycleScheduler:
    """Calls ``job`` on the schedule; :meth:`aclose` stops it and cancels a running cycle."""

    def __init__(self, schedule: str, job: Callable[[], Awaitable[object]]) -> None:
        self.schedule = schedule
        self._job = job
        self._waiting: asyncio.Task[None] | None = None
        self._running: asyncio.Task[None] | None = None
        self.fired = 0  # cycles started (tests, diagnostics)

    @property
    def started(self) -> bool:
        return self._waiting is not None

    def start(self) -> None:
        begun = datetime.now(UTC)
        due = next_fire(self.schedule, begun, start=begun)
        self._waiting = asyncio.create_task(self._wait(begun, due), name="evolution.schedule")
        log.info("evolution.scheduled", schedule=self.schedule, next_run=str(due))

    async def _wait(self, begun: datetime, due: datetime) -> None:
        while True:
            now = datetime.now(UTC)
            wait = (due - now).total_seconds()
            if wait > 0:
                await asyncio.sleep(min(wait, RECHECK))
                continue
            if -wait <= MISFIRE_GRACE:
                self._fire()
            else:
                log.warning("evolution.cycle_missed", due=str(due), late_s=round(-wait))
            # From now, not from ``due``: the occurrences missed meanwhile are this one run.
            due = next_fire(self.schedule, now, start=begun)

    def _fire(self) -> None:
        if self._running is not None and not self._running.done():
            log.warning("evolution.cycle_skipped", reason="the previous cycle is still running")
            return
        self.fired += 1
        self._running = asyncio.create_task(self._run(), name="evolution.cycle")

    async def _run(self) -> None:
        try:
            await self._job()
        except Exception:
            log.exception("evolution.cycle_failed")

    async def aclose(self) -> None:
        for task in (self._waiting, self._running):
            if task is not None:
                await cancel_and_wait(task)
        self._waiting = self._running = None
