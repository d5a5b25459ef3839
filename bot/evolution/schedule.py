"""Running the evolution cycle on ``evolution.schedule`` with APScheduler 3.

APScheduler is imported when the schedule starts, not with this module, so ``loopgate --help``
and the other commands don't pay for it. The scheduler job only starts a task of our own
(one at a time: a cycle still running when the next is due is skipped, logged), so shutting
down cancels and awaits exactly that task and leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import UTC
from typing import Any

import structlog
from pydantic import TypeAdapter

from bot.config.base import Duration
from bot.config.evolution import schedule_kind

log = structlog.get_logger(__name__)

_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def cron_weekdays(field: str) -> str:
    """A crontab weekday field with its numbers as names: APScheduler 3 reads 0 as Monday,
    crontab (and operators) as Sunday; names mean the same to both. Steps stay numbers."""

    def name(match: re.Match[str]) -> str:
        return _WEEKDAYS[int(match[0]) % 7]

    parts = []
    for part in field.split(","):
        base, slash, step = part.partition("/")
        parts.append(re.sub(r"\d+", name, base) + slash + step)
    return ",".join(parts)


def build_trigger(schedule: str) -> Any:
    """The APScheduler trigger of an ``evolution.schedule`` value (UTC)."""
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]
    from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

    kind, value = schedule_kind(schedule)
    if kind == "interval":
        seconds = TypeAdapter(Duration).validate_python(value)
        return IntervalTrigger(seconds=seconds, timezone=UTC)
    minute, hour, day, month, weekday = value.split()
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=cron_weekdays(weekday),
        timezone=UTC,
    )


class CycleScheduler:
    """Calls ``job`` on the schedule; :meth:`aclose` stops it and cancels a running cycle."""

    def __init__(self, schedule: str, job: Callable[[], Awaitable[object]]) -> None:
        self.schedule = schedule
        self._job = job
        self._scheduler: Any = None
        self._running: asyncio.Task[None] | None = None
        self.fired = 0  # cycles started (tests, diagnostics)

    @property
    def started(self) -> bool:
        return self._scheduler is not None

    def start(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler  # type: ignore[import-untyped]

        # Its INFO lines ("Running job ...") would repeat our own evolution.cycle event.
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        scheduler = AsyncIOScheduler(timezone=UTC)
        scheduler.add_job(
            self._fire,
            build_trigger(self.schedule),
            id="evolution.cycle",
            coalesce=True,  # missed runs (a suspended laptop) become one
            max_instances=1,
            misfire_grace_time=3600,
        )
        scheduler.start()
        self._scheduler = scheduler
        job = scheduler.get_job("evolution.cycle")
        log.info("evolution.scheduled", schedule=self.schedule, next_run=str(job.next_run_time))

    async def _fire(self) -> None:
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
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler.shutdown runs via call_soon
        task, self._running = self._running, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            with suppress(asyncio.CancelledError):
                await task
