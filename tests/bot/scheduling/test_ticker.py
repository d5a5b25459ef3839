"""The ticker against the real ``cron_jobs`` table and a recording intake whose keys are
unique like the inbox's: fire once, catch up, miss and tell once, skip, retry, and two tickers
(two processes) that fire each occurrence once."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_core import parse_schedule
from bot.scheduling.ticker import MIN_WAIT, Ticker, TickReport, missed_key, occurrence_key
from bot.storage import Database
from bot.storage.cron import SqlCronJobs, StoredCronJob
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.storage_support import backend, db  # noqa: F401

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
HOUR = 3600.0


@dataclass
class Stored:
    inbox_id: int | None


@dataclass
class Intake:
    """Keys are unique, as the inbox's dedupe record makes them."""

    channels: set[str] = field(default_factory=lambda: {"telegram"})
    keys: dict[str, tuple[InboundMessage, str | None]] = field(default_factory=dict)
    failing: bool = False
    accepting: bool = True

    def has_channel(self, name: str) -> bool:
        return name in self.channels

    async def enqueue(
        self,
        msg: InboundMessage,
        *,
        agent_id: str,
        session_key: str,
        dedupe_key: str,
        answer: str | None = None,
    ) -> Stored | None:
        if self.failing:
            raise ConnectionError("database is down")
        if dedupe_key in self.keys:
            return None
        self.keys[dedupe_key] = (msg, answer)
        return Stored(len(self.keys))


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


ORIGIN = InboundMessage(
    chat=ChatRef("telegram", "100", ChatType.DIRECT),
    message_id="7",
    sender=Sender("1", "Ann"),
    text="remind me",
    received_at=T0,
)


async def add(jobs: SqlCronJobs, text: str, first: datetime | None = None) -> StoredCronJob:
    schedule = parse_schedule(text, "UTC", T0, min_interval=60)
    return await jobs.add(
        agent_id="main",
        session_key="agent:main:telegram:direct:100",
        origin=ORIGIN,
        schedule=schedule,
        message=f"job {text}",
        next_run_at=first or schedule.first_run(T0),
    )


@pytest.fixture
def jobs(db: Database) -> SqlCronJobs:  # noqa: F811
    return SqlCronJobs(db)


def ticker(jobs: SqlCronJobs, intake: Intake, clock: Clock, **kw: object) -> Ticker:
    return Ticker(jobs, intake, catch_up=HOUR, clock=clock, **kw)  # type: ignore[arg-type]


async def test_a_due_job_fires_once_with_its_key_and_moves_on(jobs: SqlCronJobs) -> None:
    job = await add(jobs, "every 1h")
    intake, clock = Intake(), Clock(T0)
    tick = ticker(jobs, intake, clock)
    assert (await tick.tick()).fired == 0  # not yet due
    clock.now = T0 + timedelta(hours=1, seconds=1)
    assert (await tick.tick()).fired == 1
    assert (await tick.tick()).fired == 0
    at = T0 + timedelta(hours=1)
    [(key, (msg, answer))] = intake.keys.items()
    assert key == occurrence_key(job.id, at) == f"cron:{job.id}:2026-12-04T10:00:00+00:00"
    assert answer is None and msg.text == "job every 1h"
    assert msg.chat == ORIGIN.chat and msg.sender == ORIGIN.sender
    assert msg.metadata["cron_job"] == job.id
    assert msg.metadata["cron_schedule"] == "every 1h"
    moved = await jobs.get(job.id)
    assert moved is not None
    assert moved.next_run_at == T0 + timedelta(hours=2)
    assert (moved.last_run_at, moved.last_outcome, moved.last_entry) == (at, "fired", 1)
    assert tick.passes == 3


async def test_two_tickers_fire_each_occurrence_once(jobs: SqlCronJobs) -> None:
    for n in range(5):
        await add(jobs, "every 1h", first=T0 + timedelta(minutes=n))
    intake, clock = Intake(), Clock(T0 + timedelta(minutes=10))
    first, second = ticker(jobs, intake, clock), ticker(jobs, intake, clock)
    # Both read the same due jobs before either moves them on (the race of two processes).
    due = await jobs.due(clock.now)
    a, b = await first.tick(), await second.tick()
    assert (a.fired, b.fired) == (5, 0)
    late = TickReport()
    for job in due:  # the second process acting on what it read before the first moved on
        await second._occur(job, clock.now, late)
    assert (late.fired, late.duplicates) == (0, 5)
    assert len(intake.keys) == 5
    # Moved on once each (to the grid's next hour), not twice.
    assert [j.next_run_at for j in await jobs.list()] == [T0 + timedelta(hours=1)] * 5


async def test_a_stored_occurrence_whose_job_was_not_moved_on_is_not_fired_again(
    jobs: SqlCronJobs,
) -> None:
    job = await add(jobs, "in 1m")
    intake, clock = Intake(), Clock(T0 + timedelta(minutes=2))
    # A process stored the occurrence and died before moving the job on.
    assert job.next_run_at is not None
    intake.keys[occurrence_key(job.id, job.next_run_at)] = (ORIGIN, None)
    report = await ticker(jobs, intake, clock).tick()
    assert (report.fired, report.duplicates) == (0, 1)
    done = await jobs.get(job.id)
    assert done is not None and done.next_run_at is None


async def test_catch_up_fires_the_latest_missed_occurrence_once(jobs: SqlCronJobs) -> None:
    job = await add(jobs, "every 10m")  # due 09:10, 09:20, ...
    intake = Intake()
    # Down from 09:05 to 09:45: 09:10..09:40 passed; 09:40 is 5 minutes late.
    report = await ticker(jobs, intake, Clock(T0 + timedelta(minutes=45))).tick()
    assert (report.fired, report.missed) == (1, 0)
    assert list(intake.keys) == [occurrence_key(job.id, T0 + timedelta(minutes=40))]
    moved = await jobs.get(job.id)
    assert moved is not None and moved.next_run_at == T0 + timedelta(minutes=50)
    assert moved.last_outcome == "fired 5 min late (caught up)"


async def test_too_late_is_missed_and_told_once(jobs: SqlCronJobs) -> None:
    once = await add(jobs, "in 10m")
    daily = await add(jobs, "0 8 * * *")  # due 2026-12-05 08:00
    intake = Intake()
    clock = Clock(T0 + timedelta(days=3, hours=2))  # 3 days down: every run is hours late
    tick = ticker(jobs, intake, clock)
    report = await tick.tick()
    await tick.tick()
    assert (report.fired, report.missed) == (0, 2)
    once_at = T0 + timedelta(minutes=10)
    daily_at = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # the latest of the three missed
    assert set(intake.keys) == {missed_key(once.id, once_at), missed_key(daily.id, daily_at)}
    msg, notice = intake.keys[missed_key(daily.id, daily_at)]
    assert notice is not None and msg.text == notice  # delivered as it is, no model run
    assert "missed a scheduled 3 runs" in notice and "Mon 2026-12-07 08:00 UTC" in notice
    assert f"of job {daily.id} (0 8 * * *)" in notice
    _, once_notice = intake.keys[missed_key(once.id, once_at)]
    assert once_notice is not None and "missed a scheduled run due Fri 2026-12-04 09:10" in (
        once_notice
    )
    gone = await jobs.get(once.id)
    assert gone is not None and gone.next_run_at is None
    assert gone.last_outcome is not None and gone.last_outcome.startswith("missed")
    later = await jobs.get(daily.id)
    assert later is not None and later.next_run_at == datetime(2026, 12, 8, 8, 0, tzinfo=UTC)


async def test_a_failed_enqueue_leaves_the_job_due(jobs: SqlCronJobs) -> None:
    job = await add(jobs, "in 1m")
    intake, clock = Intake(failing=True), Clock(T0 + timedelta(minutes=2))
    tick = ticker(jobs, intake, clock)
    assert (await tick.tick()).failed == 1
    still = await jobs.get(job.id)
    assert still is not None and still.next_run_at == job.next_run_at
    intake.failing = False
    assert (await tick.tick()).fired == 1


async def test_skip_and_a_missing_channel_move_the_job_on(jobs: SqlCronJobs) -> None:
    skipped = await add(jobs, "every 1h")
    clock = Clock(T0 + timedelta(hours=1))
    intake = Intake()

    def skip(job: StoredCronJob, at: datetime) -> str | None:
        return "outside active hours" if job.id == skipped.id else None

    report = await ticker(jobs, intake, clock, skip=skip).tick()
    assert (report.skipped, report.fired) == (1, 0)
    moved = await jobs.get(skipped.id)
    assert moved is not None and moved.last_outcome == "skipped: outside active hours"
    assert moved.next_run_at == T0 + timedelta(hours=2)

    intake.channels = set()
    clock.now = T0 + timedelta(hours=2)
    report = await ticker(jobs, intake, clock).tick()
    assert report.failed == 1 and not intake.keys
    failed = await jobs.get(skipped.id)
    assert failed is not None and failed.last_outcome == "failed: channel 'telegram' not enabled"


async def test_nothing_fires_while_the_service_shuts_down(jobs: SqlCronJobs) -> None:
    job = await add(jobs, "in 1m")
    intake, clock = Intake(accepting=False), Clock(T0 + timedelta(minutes=2))
    assert await ticker(jobs, intake, clock).tick() == TickReport()
    still = await jobs.get(job.id)
    assert still is not None and still.next_run_at == job.next_run_at  # the next process's


async def test_paused_jobs_wait(jobs: SqlCronJobs) -> None:
    job = await add(jobs, "in 1m")
    await jobs.set_paused(job.id, True)
    intake, clock = Intake(), Clock(T0 + timedelta(minutes=2))
    assert (await ticker(jobs, intake, clock).tick()).fired == 0
    await jobs.set_paused(job.id, False)
    assert (await ticker(jobs, intake, clock).tick()).fired == 1


async def test_more_due_jobs_than_one_batch(jobs: SqlCronJobs) -> None:
    for n in range(7):
        await add(jobs, "in 1m", first=T0 + timedelta(seconds=n))
    intake = Intake()
    report = await ticker(jobs, intake, Clock(T0 + timedelta(minutes=1)), batch=3).tick()
    assert report.fired == 7 and len(intake.keys) == 7


async def test_the_next_pass_comes_when_the_soonest_job_is_due(jobs: SqlCronJobs) -> None:
    clock = Clock(T0)
    tick = ticker(jobs, Intake(), clock)

    async def until_next(*, retrying: bool = False) -> float:
        return tick._wait_until(await jobs.next_due_at(), 1.0, retrying=retrying)

    assert await until_next() == 1.0  # nothing scheduled
    await add(jobs, "in 1m", first=T0 + timedelta(seconds=30))
    assert await until_next() == 1.0  # not sooner than the period
    soon = await add(jobs, "in 1m", first=T0 + timedelta(milliseconds=200))
    assert await until_next() == pytest.approx(0.205)
    clock.now = T0 + timedelta(seconds=1)  # due already (the timer woke a moment early)
    assert await until_next() == MIN_WAIT
    # A pass that failed to store it retries at the normal pace, not in a busy loop.
    assert await until_next(retrying=True) == 1.0
    await jobs.set_paused(soon.id, True)
    assert await until_next() == 1.0  # a paused job is not waited for


class CountingJobs:
    """The real store, counting the ticker's two queries."""

    def __init__(self, jobs: SqlCronJobs) -> None:
        self.jobs = jobs
        self.calls: list[str] = []

    async def due(self, now: datetime, limit: int = 500) -> list[StoredCronJob]:
        self.calls.append("due")
        return await self.jobs.due(now, limit)

    async def next_due_at(self) -> datetime | None:
        self.calls.append("next_due_at")
        return await self.jobs.next_due_at()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jobs, name)


async def test_an_idle_pass_makes_one_query_and_a_due_job_still_fires(jobs: SqlCronJobs) -> None:
    counting = CountingJobs(jobs)
    intake, clock = Intake(), Clock(T0)
    tick = ticker(jobs, intake, clock)
    tick.jobs = counting  # type: ignore[assignment]
    await add(jobs, "in 1m", first=T0 + timedelta(seconds=30))

    assert await tick._pass(1.0) == 1.0  # the start-up pass always looks for due jobs
    assert counting.calls == ["due", "next_due_at"] and tick.passes == 1
    counting.calls.clear()
    assert await tick._pass(1.0) == 1.0  # nothing due: one query
    assert counting.calls == ["next_due_at"] and tick.passes == 2

    counting.calls.clear()
    clock.now = T0 + timedelta(seconds=31)
    await tick._pass(1.0)  # due now: looked for, fired, and the next one asked
    assert counting.calls == ["next_due_at", "due", "next_due_at"] and tick.passes == 3
    assert len(intake.keys) == 1


class TornDownJobs:
    """A store whose query, cancelled, fails with its driver's own error (a connection torn
    down mid-query), not with CancelledError; from the second cancel on, as asyncio would."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.cancels = 0

    async def due(self, now: datetime, batch: int) -> list[StoredCronJob]:
        self.asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancels += 1
            if self.cancels > 1:
                raise
            raise RuntimeError("connection closed mid-query") from None
        return []

    async def next_due_at(self) -> datetime | None:
        return None


async def test_a_cancellation_the_store_turns_into_its_error_still_ends_the_loop() -> None:
    jobs = TornDownJobs()
    tick = Ticker(jobs, Intake(), catch_up=HOUR, clock=Clock(T0))  # type: ignore[arg-type]
    task = asyncio.create_task(tick.run_forever(every=0.05))
    await asyncio.wait_for(jobs.asked.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:  # it logged cron.tick_failed and ticked on: a close would wait forever
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
    assert task in done and task.cancelled() and jobs.cancels == 1
