"""Scheduled work in one process: the heartbeats from config.yaml and the ticker's task."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog

from agent_core import cancel_and_wait
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
        """In the background, start-up does not wait for it: the heartbeats from config.yaml,
        then the ticker, whose first pass catches up on what came due while the service was
        down (``cron.started`` is logged when it is done)."""
        self._task = asyncio.create_task(self._run(every), name="cron:ticker")

    async def _run(self, every: float) -> None:
        try:
            await sync_heartbeats(self.config, self.jobs, datetime.now(UTC))
        except Exception as exc:  # the jobs already stored still run
            log.warning("cron.heartbeats_failed", error=repr(exc))
        await self.ticker.run_forever(every)

    async def aclose(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
