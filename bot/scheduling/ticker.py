"""The ticker: every second, the due jobs' occurrences go into the inbox, once each.

For each due job the ticker finds the latest occurrence that has passed (earlier ones, missed
while the service was down, fold into it) and:

- **fires** it when it is at most ``cron.catch_up`` late: the job's message enters the inbox
  as a turn of the agent in the job's chat (:class:`Intake`, the gateway), under the key
  ``cron:<job id>:<scheduled time>``;
- records it as **missed** otherwise, and tells the user once: a notice enters the inbox under
  ``cron-missed:<job id>:<scheduled time>`` with its text as the saved answer (no model run);
- **skips** it when a heartbeat is outside its active hours.

Then the job moves on to its next occurrence (:meth:`SqlCronJobs.advance`, only from the
occurrence it read). Every process of a cluster runs a ticker: two that fire the same
occurrence meet on the inbox's dedupe key and only one stores it, so it runs once without a
lock; a process that dies between storing and advancing leaves the job due, and the next pass
(here or elsewhere) finds the key taken and only advances it. Once stored, an occurrence is an
inbox entry like any message: leased, replayed after a crash, taken over from a dead process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import structlog

from agent_core import stop_if_cancelled
from bot.pipeline.job import CRON_AT, CRON_JOB, CRON_SCHEDULE
from bot.storage.cron import SqlCronJobs, StoredCronJob
from channels import InboundMessage

log = structlog.get_logger(__name__)

TICK_SECONDS = 1.0
MIN_WAIT = 0.005
"""Between passes at least: a timer that fires a moment early finds its job not quite due."""
MAX_FOLDED = 100_000
"""Occurrences a pass looks back over for one job (a minutely job down for two months)."""


class Enqueued(Protocol):
    @property
    def inbox_id(self) -> int | None: ...


class Intake(Protocol):
    """Where an occurrence goes (:meth:`bot.pipeline.gateway.Gateway.enqueue`)."""

    @property
    def accepting(self) -> bool:
        """False while the service shuts down: nothing is fired, the next process does it."""
        ...

    def has_channel(self, name: str) -> bool: ...

    async def enqueue(
        self,
        msg: InboundMessage,
        *,
        agent_id: str,
        session_key: str,
        dedupe_key: str,
        answer: str | None = None,
    ) -> Enqueued | None:
        """None when ``dedupe_key`` was taken before; raises when it can't be stored."""
        ...


Skip = Callable[[StoredCronJob, datetime], str | None]
"""Why an occurrence is skipped (a heartbeat outside its active hours), None: run it."""


@dataclass
class TickReport:
    fired: int = 0
    duplicates: int = 0
    missed: int = 0
    skipped: int = 0
    failed: int = 0


def occurrence_key(job_id: str, at: datetime) -> str:
    return f"cron:{job_id}:{at.astimezone(UTC).isoformat()}"


def missed_key(job_id: str, at: datetime) -> str:
    return f"cron-missed:{job_id}:{at.astimezone(UTC).isoformat()}"


def missed_notice(job: StoredCronJob, at: datetime, count: int) -> str:
    when = job.schedule.describe(at)
    runs = "run" if count == 1 else f"{count} runs (the last"
    close = "" if count == 1 else ")"
    return (
        f"I missed a scheduled {runs} due {when}{close} of job {job.id} ({job.schedule.text}) "
        f"because the service was not running. The job was: {job.message}"
    )


class Ticker:
    def __init__(
        self,
        jobs: SqlCronJobs,
        intake: Intake,
        *,
        catch_up: float,
        skip: Skip | None = None,
        clock: Callable[[], datetime] | None = None,
        batch: int = 500,
    ) -> None:
        self.jobs = jobs
        self.intake = intake
        self.catch_up = catch_up
        self.skip = skip
        self.clock = clock or (lambda: datetime.now(UTC))
        self.batch = batch
        self.wake = asyncio.Event()
        """Set to tick at once (``loopgate cron run`` through the dashboard)."""
        self.passes = 0
        """Passes completed (health, and tests that wait for the next one)."""

    async def run_forever(self, every: float = TICK_SECONDS) -> None:
        while True:
            stop_if_cancelled()
            wait = every
            try:
                wait = await self._pass(every)
            except Exception as exc:  # the database is down: the next pass tries again
                # A cancellation that came back as the driver's error is still one: the
                # service's close would otherwise wait for this loop forever.
                stop_if_cancelled(exc)
                log.warning("cron.tick_failed", error=repr(exc))
            # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancellation that
            # arrives with the wake-up.
            with suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self.wake.wait()
            self.wake.clear()

    async def _pass(self, every: float) -> float:
        """One pass of the loop; returns the seconds to the next. A pass first asks when the
        soonest job is due and looks for due jobs only if one is: an idle service makes one
        query a second, not two (issue 33's idle budget). The start-up pass always looks."""
        if self.passes > 0 and self.intake.accepting:
            at = await self.jobs.next_due_at()
            if at is None or at > self.clock():
                self.passes += 1
                return self._wait_until(at, every, retrying=False)
        report = await self.tick()
        if self.passes == 1:  # the start-up pass: what came due while down
            log.info(
                "cron.started",
                fired=report.fired,
                missed=report.missed,
                skipped=report.skipped,
            )
        at = await self.jobs.next_due_at()
        return self._wait_until(at, every, retrying=report.failed > 0)

    def _wait_until(self, at: datetime | None, every: float, *, retrying: bool) -> float:
        """Seconds to the next pass: the soonest job's due time ``at``, at most ``every`` (a
        job another process adds is seen within it). When this pass failed to store
        something, what is still due waits the whole period: no busy loop."""
        if at is None:
            return every
        left = (at - self.clock()).total_seconds()
        if left <= 0:  # came due during this pass, or the timer woke a moment early
            return every if retrying else MIN_WAIT
        return min(every, left + MIN_WAIT)

    async def tick(self) -> TickReport:
        """One pass over what is due now."""
        report = TickReport()
        if not self.intake.accepting:
            return report
        now = self.clock()
        while True:
            due = await self.jobs.due(now, self.batch)
            for job in due:
                await self._occur(job, now, report)
            if len(due) < self.batch:
                self.passes += 1
                return report

    async def _occur(self, job: StoredCronJob, now: datetime, report: TickReport) -> None:
        expected = job.next_run_at
        assert expected is not None
        latest, folded = expected, 0
        following = job.schedule.next_after(expected)
        while following is not None and following <= now and folded < MAX_FOLDED:
            latest, folded = following, folded + 1
            following = job.schedule.next_after(following)
        late = (now - latest).total_seconds()
        try:
            if (reason := self.skip(job, latest) if self.skip else None) is not None:
                report.skipped += 1
                outcome, entry = f"skipped: {reason}", None
            elif not self.intake.has_channel(job.origin.chat.channel):
                report.failed += 1
                outcome, entry = f"failed: channel {job.origin.chat.channel!r} not enabled", None
                log.warning("cron.channel_gone", job=job.id, channel=job.origin.chat.channel)
            elif late <= self.catch_up:
                entry = await self._fire(job, latest, report)
                outcome = "fired" if late < 60 else f"fired {late / 60:.0f} min late (caught up)"
                if folded:
                    log.info("cron.folded", job=job.id, skipped=folded, at=latest.isoformat())
            else:
                entry = await self._missed(job, latest, folded + 1, report)
                outcome = f"missed ({late / 60:.0f} min late; over cron.catch_up)"
        except Exception as exc:  # not stored: the job stays due and the next pass retries
            log.warning("cron.fire_failed", job=job.id, error=repr(exc))
            report.failed += 1
            return
        moved = await self.jobs.advance(
            job.id,
            expected=expected,
            next_run_at=following,
            outcome=outcome,
            ran_at=latest,
            entry=entry,
        )
        if not moved:
            log.info("cron.advanced_elsewhere", job=job.id, at=expected.isoformat())

    def _message(self, job: StoredCronJob, at: datetime, text: str) -> InboundMessage:
        origin = job.origin
        return replace(
            origin,
            text=text,
            reply_to_text=None,
            received_at=self.clock(),
            metadata={
                **origin.metadata,
                CRON_JOB: job.id,
                CRON_SCHEDULE: job.schedule.text,
                CRON_AT: job.schedule.describe(at),
            },
        )

    async def _fire(self, job: StoredCronJob, at: datetime, report: TickReport) -> int | None:
        stored = await self.intake.enqueue(
            self._message(job, at, job.message),
            agent_id=job.agent_id,
            session_key=job.session_key,
            dedupe_key=occurrence_key(job.id, at),
        )
        if stored is None:
            report.duplicates += 1
            log.info("cron.duplicate", job=job.id, at=at.isoformat())
            return None
        report.fired += 1
        log.info("cron.fired", job=job.id, at=at.isoformat(), entry=stored.inbox_id)
        return stored.inbox_id

    async def _missed(
        self, job: StoredCronJob, at: datetime, count: int, report: TickReport
    ) -> int | None:
        notice = missed_notice(job, at, count)
        stored = await self.intake.enqueue(
            self._message(job, at, notice),
            agent_id=job.agent_id,
            session_key=job.session_key,
            dedupe_key=missed_key(job.id, at),
            answer=notice,
        )
        report.missed += 1
        log.warning("cron.missed", job=job.id, at=at.isoformat(), runs=count)
        return None if stored is None else stored.inbox_id
