"""One process's scheduled work (``bot/scheduling/service.py``): start-up syncs the heartbeats
from config.yaml in the background and then runs the ticker; a failed sync leaves the ticker
running; closing stops it, and closing twice or before a start is harmless."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from bot.config import parse_config
from bot.scheduling.service import Scheduling
from bot.storage import Database
from bot.storage.cron import SqlCronJobs, StoredCronJob
from tests.bot.scheduling.test_heartbeat import config
from tests.bot.scheduling.test_ticker import Intake
from tests.storage_support import backend, db  # noqa: F401
from tests.waiting import wait_until


class BrokenPut(SqlCronJobs):
    """The cron table refuses writes: the heartbeats can't be stored."""

    async def put(self, job: StoredCronJob) -> None:
        raise ConnectionError("database is read-only")


async def test_start_stores_the_heartbeats_and_runs_the_ticker(db: Database) -> None:  # noqa: F811
    jobs = SqlCronJobs(db)
    scheduling = Scheduling(config(), jobs, Intake())
    await scheduling.start(every=3600)
    try:
        await wait_until(lambda: scheduling.ticker.passes >= 1, 10)
        assert await jobs.get("heartbeat-main") is not None  # synced before the first pass
    finally:
        await scheduling.aclose()


async def test_a_failed_heartbeat_sync_still_runs_the_ticker(db: Database) -> None:  # noqa: F811
    scheduling = Scheduling(config(), BrokenPut(db), Intake())
    with capture_logs() as logs:
        await scheduling.start(every=3600)
        try:
            await wait_until(lambda: scheduling.ticker.passes >= 1, 10)
        finally:
            await scheduling.aclose()
    [failed] = [e for e in logs if e["event"] == "cron.heartbeats_failed"]
    assert "read-only" in failed["error"]


async def test_close_stops_the_ticker_and_may_repeat(db: Database) -> None:  # noqa: F811
    scheduling = Scheduling(parse_config({}, {}), SqlCronJobs(db), Intake())
    await scheduling.aclose()  # never started
    await scheduling.start(every=3600)
    task = scheduling._task
    assert task is not None
    await wait_until(lambda: scheduling.ticker.passes >= 1, 10)
    await scheduling.aclose()
    assert task.cancelled() and scheduling._task is None
    await scheduling.aclose()
    assert {t.get_name() for t in asyncio.all_tasks()}.isdisjoint({"cron:ticker"})


async def test_the_ticker_follows_the_cron_settings(db: Database) -> None:  # noqa: F811
    late_is_fine = parse_config({"cron": {"catch_up": "5m"}}, {})
    scheduling = Scheduling(late_is_fine, SqlCronJobs(db), Intake())
    assert scheduling.ticker.catch_up == 300
