"""Scheduled work in one process: the heartbeats from config.yaml and the ticker's task."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from datetime import UTC, datetime

import structlog

from bot.config import Config
from bot.scheduling.heartbeat import ActiveHours, sync_heartbeats
from bot.scheduling.ticker import TICK_SECONDS, Intake, Ticker
from bot.storage.cron import SqlCronJobs

log = structlog.get_logger(__name__)


class Scheduling:
    def __init__(self, config: Config, jobs: SqlCronJobs, intake: Intake) -> None:
        self.config = config
        self.jobs = jobs
        self.ticker = Ticker(jobs, intake, catch_up=config.cron.catch_up, skip=ActiveHours(config))
        self._task: asyncio.Task[None] | None = None

    async def start(self, every: float = TICK_SECONDS) -> None:
        """Heartbeats first, then the ticker, whose first pass catches up on what came due
        while the service was down."""
        await sync_heartbeats(self.config, self.jobs, datetime.now(UTC))
        try:  # done before start-up ends, so what came due while down goes first
            await self.ticker.tick()
        except Exception as exc:  # the ticker's next pass tries again
            log.warning("cron.tick_failed", error=repr(exc))
        self._task = asyncio.create_task(self.ticker.run_forever(every), name="cron:ticker")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
