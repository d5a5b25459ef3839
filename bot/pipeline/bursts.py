"""A burst of messages is one turn: ``bot.debounce_ms`` and ``bot.queue_mode``.

``Gateway.handle`` stores every message in the durable inbox on its own, then hands its job here
on its way to the scheduler:

- **Debounce.** With ``bot.debounce_ms`` > 0 a message waits that long; each new message of the
  burst restarts the wait, and when it passes quietly the burst goes on as one job. With 0 (the
  default) this step is skipped: the job goes on at once, without a timer.
- **Queue mode**, for what arrives while the session is busy. ``followup``: each burst is its own
  next turn. ``collect`` (default): a burst joins the one already waiting in the queue, so
  everything that piled up during a run is one next turn. ``interrupt``: as ``collect``, and when
  a run of the same sender is going it is cancelled through the run registry (as the sender's
  ``/stop`` would, without the "Stopped." reply); once it has ended, the interrupted message is
  answered together with the new ones (unless its answer had gone out already).
- **Albums.** The messages of one album (``channels.MEDIA_GROUP``: Telegram sends each
  picture of a media group as its own message, within a moment) wait :data:`ALBUM_WAIT` after
  the last part, whatever ``bot.debounce_ms``, and are one turn: every part's attachments and
  the caption go to the model in one run. Each part was stored in the inbox when it came; the
  merged turn ends them all. A message that comes while an album waits joins it.
- **Groups.** A burst is one sender's messages: several people talk in a group, and a turn runs
  with its sender's name, workspace and right to stop it, so no merge mixes senders. The queue
  modes act on what waits in the queue, which in a group happens only when all
  ``bot.group_concurrency`` runs are busy: a message that can start at once still runs beside the
  others, as before. ``interrupt`` cancels only the sender's own run.

A merged job is the burst's LAST message (a group reply quotes it, the status reactions go on it)
with the texts of all of them, blank-line separated, in arrival order. It carries the earlier
messages' inbox entries in ``Job.absorbed`` (they end with its own); when it ends, the earlier
messages' reactions are cleaned up and their jobs settle with its result. Commands never come
here (the gateway acts on them at once); replayed entries and background results go to the
scheduler directly and are never merged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import structlog

from agent_core import RunResult, RunStatus
from bot.config import BotConfig
from bot.pipeline.job import Job, ended_ok
from bot.pipeline.reactions import ReactionCleanups
from bot.pipeline.run_registry import RunRegistry
from bot.pipeline.scheduler import Scheduler
from bot.storage.inbox import InboxState, SqlInbox
from channels import MEDIA_GROUP, ChatType

log = structlog.get_logger(__name__)

ALBUM_WAIT = 1.0
"""Seconds an album waits after its last part: Telegram delivers the parts of one media group
together, in one batch of updates or webhooks a few milliseconds apart."""

BurstKey = tuple[str, str]
"""Whose burst: the session key, and the sender in a group ("" in a direct chat)."""


def _album(job: Job) -> bool:
    return MEDIA_GROUP in job.message.metadata


def burst_key(job: Job) -> BurstKey:
    group = job.message.chat.chat_type is ChatType.GROUP
    return job.session_key, job.requester_id if group else ""


@dataclass
class _Window:
    """A burst waiting for ``bot.debounce_ms`` of quiet."""

    jobs: list[Job]
    timer: asyncio.TimerHandle


@dataclass
class _Interrupted:
    """A run cancelled by newer messages, until it has ended and they can be answered."""

    run: Job
    jobs: list[Job]
    dropped: str = ""
    """Why, when everything waiting was dropped (its entries then end with that reason)."""


class Turns(Protocol):
    """What runs a job (:class:`bot.pipeline.turn.TurnRunner`)."""

    cleanups: ReactionCleanups

    async def run(self, job: Job) -> None: ...

    async def dropped(self, job: Job) -> None: ...


class Bursts:
    """In front of the per-session scheduler, which it owns: the scheduler runs each job's turn
    and hands it back here when it ends (:meth:`ended`)."""

    def __init__(
        self,
        config: BotConfig,
        registry: RunRegistry,
        turns: Turns,
        *,
        inbox: SqlInbox | None = None,
    ) -> None:
        self.debounce = config.debounce_ms / 1000
        self.mode = config.queue_mode
        self.registry = registry
        self.inbox = inbox
        self._turns = turns
        self.scheduler: Scheduler[Job] = Scheduler(
            turns.run,
            queue_cap=config.queue_cap,
            max_running=config.max_concurrent_runs,
            on_drop=self._dropped,
            on_done=self.ended,
        )
        self._windows: dict[BurstKey, _Window] = {}
        self._interrupted: dict[BurstKey, _Interrupted] = {}
        self._ours: dict[str, Job] = {}
        """Jobs handed to the scheduler from here, by run id, until they end: what later
        messages may join or interrupt."""
        self._earlier: dict[Job, list[Job]] = {}
        """A merged job → the jobs of the burst's earlier messages (settled when it ends)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def sessions(self) -> set[str]:
        """Sessions with a burst waiting for its window or an interrupted run to end."""
        return {key[0] for key in (*self._windows, *self._interrupted)}

    def starts_at_once(self, job: Job) -> bool:
        """Whether ``job`` would start as soon as it is submitted (its inbox entry is then
        stored as ``running`` at once)."""
        key = burst_key(job)
        if self._wait(job) or key in self._windows or key in self._interrupted:
            return False
        if self.mode == "interrupt" and self._running(job) is not None:
            return False
        return self.scheduler.starts_at_once(job.session_key, job.concurrency)

    def submit(self, job: Job) -> None:
        """Take a stored message's job: now (no debounce), or when its burst is complete."""
        key = burst_key(job)
        window = self._windows.get(key)
        if window is None and not self._wait(job):
            self._route(job)
            return
        jobs = [job] if window is None else [*window.jobs, job]
        # Each new message restarts the wait (an album's, while any part of one is in it).
        wait = max(self._wait(j) for j in jobs)
        timer = asyncio.get_running_loop().call_later(wait, self._window_passed, key)
        if window is None:
            self._windows[key] = _Window(jobs, timer)
        else:
            window.timer.cancel()
            window.jobs = jobs
            window.timer = timer

    def _wait(self, job: Job) -> float:
        """How long ``job`` waits for more of its burst."""
        return max(self.debounce, ALBUM_WAIT) if _album(job) else self.debounce

    def drop_held(
        self, session_key: str, predicate: Callable[[Job], bool], reason: str
    ) -> list[Job]:
        """Drop matching jobs that wait here (a debounce window, or for an interrupted run to
        end): ``/stopall``, or ``/stop`` with no run to stop. Returns them."""
        dropped: list[Job] = []
        holders: list[tuple[BurstKey, _Window | _Interrupted]] = [
            *self._windows.items(),
            *self._interrupted.items(),
        ]
        for key, holder in holders:
            if key[0] != session_key:
                continue
            dropped += [job for job in holder.jobs if predicate(job)]
            holder.jobs = [job for job in holder.jobs if not predicate(job)]
            if holder.jobs:
                continue
            if isinstance(holder, _Window):
                holder.timer.cancel()
                del self._windows[key]
            else:
                holder.dropped = reason  # the cancelled run is not answered after all
                del self._interrupted[key]
        for job in dropped:
            job.drop_reason = reason
            self._spawn(self._dropped(job))
        return dropped

    def merge(self, jobs: Sequence[Job]) -> Job:
        """One job for a burst (in arrival order): the last message with all the texts."""
        last = jobs[-1]
        if len(jobs) == 1:
            return last
        earlier = list(jobs[:-1])
        entries = {entry for job in jobs for entry in job.absorbed}
        entries.update(job.inbox_id for job in earlier if job.inbox_id is not None)
        reply_to = next(
            (j.message.reply_to_text for j in reversed(jobs) if j.message.reply_to_text), None
        )
        message = replace(
            last.message,
            text="\n\n".join(job.message.text for job in jobs if job.message.text),
            attachments=tuple(a for job in jobs for a in job.message.attachments),
            reply_to_text=reply_to,
        )
        # The last job's future and reactions are the merged job's: they settle with the turn.
        merged = replace(last, message=message, absorbed=sorted(entries))
        self._earlier[merged] = earlier + self._earlier.pop(last, [])
        log.info(
            "burst.merged",
            session_key=last.session_key,
            messages=len(jobs),
            inbox_ids=[*merged.absorbed, merged.inbox_id],
        )
        return merged

    async def ended(self, job: Job) -> None:
        """``job`` ran or was dropped: the earlier messages of its burst end with it."""
        self._ours.pop(job.run_id, None)
        earlier = self._earlier.pop(job, [])
        if not earlier:
            return
        result: RunResult | None = None
        if job.done.done() and not job.done.cancelled():
            result = job.done.result()
        for other in earlier:
            # After the turn, as its own message's: the session is free meanwhile.
            self._turns.cleanups.finish_soon(other.reactions, ok=ended_ok(result))
            await self.ended(other)
            other.settle(result)

    async def _dropped(self, job: Job) -> None:
        await self._turns.dropped(job)
        await self.ended(job)

    async def aclose(self) -> None:
        """Shutdown: what waits here or in the scheduler stays queued in the inbox for the
        next process; what runs is cancelled."""
        self._closed = True
        held: list[Job] = []
        for window in self._windows.values():
            window.timer.cancel()
            held += window.jobs
        for interrupted in self._interrupted.values():
            held += interrupted.jobs
        self._windows.clear()
        self._interrupted.clear()
        for job in held:
            job.settle(None)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.scheduler.aclose()

    def _window_passed(self, key: BurstKey) -> None:
        window = self._windows.pop(key, None)
        if window is not None and not self._closed:
            self._route(self.merge(window.jobs))

    def _route(self, job: Job) -> None:
        """A complete burst: apply the queue mode."""
        key = burst_key(job)
        interrupted = self._interrupted.get(key)
        if interrupted is not None:  # answered with the run it interrupts, once that ended
            interrupted.jobs.append(job)
            return
        if self.mode != "followup":
            queued = self._queued(job)
            if queued is not None:
                merged = self.merge([queued, job])
                self.scheduler.replace_queued(queued, merged)
                del self._ours[queued.run_id]
                self._ours[merged.run_id] = merged
                return
        if self.mode == "interrupt":
            running = self._running(job)
            if running is not None:
                running.interrupted = True  # its preview goes: the answer is about to be redone
            if running is not None and self.registry.abort(running.run_id, job.session_key):
                log.info("burst.interrupt", run_id=running.run_id, session_key=job.session_key)
                self._interrupted[key] = _Interrupted(running, [job])
                running.done.add_done_callback(partial(self._run_ended, key))
                return
        self._ours[job.run_id] = job
        self.scheduler.submit(job)

    def _queued(self, job: Job) -> Job | None:
        """The burst's queued job that ``job`` may join: the last one queued, if it is ours."""
        key = burst_key(job)
        same = [
            other for other in self.scheduler.queued(job.session_key) if burst_key(other) == key
        ]
        return same[-1] if same and self._ours.get(same[-1].run_id) is same[-1] else None

    def _running(self, job: Job) -> Job | None:
        """The newest running job of ``job``'s burst that an interrupt may cancel."""
        key = burst_key(job)
        for run in reversed(self.registry.runs_of(job.session_key)):
            found = self._ours.get(run.run_id)
            # Not one being stopped already (/stop, or an earlier interrupt).
            if found is not None and burst_key(found) == key and not run.task.cancelling():
                return found
        return None

    def _run_ended(self, key: BurstKey, done: asyncio.Future[RunResult | None]) -> None:
        interrupted = self._interrupted.get(key)
        if interrupted is None or self._closed or interrupted.run.done is not done:
            return
        result = None if done.cancelled() else done.result()
        # Cancelled before its answer went out: answer it now, with what interrupted it.
        unanswered = (
            result is not None
            and result.status is RunStatus.CANCELLED
            and interrupted.run.outcome is None
        )
        self._spawn(self._resume(key, interrupted, unanswered))

    async def _resume(self, key: BurstKey, interrupted: _Interrupted, unanswered: bool) -> None:
        run = interrupted.run
        entries = [e for e in (run.inbox_id, *run.absorbed) if e is not None]
        if unanswered and self.inbox is not None:
            # The cancelled turn ended its entries as stopped; they are pending again until
            # the turn that answers them ends (or a later process runs them).
            await self._set_entries(entries)
        if self._interrupted.get(key) is not interrupted:  # dropped meanwhile (/stopall)
            if unanswered and self.inbox is not None:
                await self._set_entries(entries, dropped=interrupted.dropped)
            return
        del self._interrupted[key]
        self._route(self.merge([run, *interrupted.jobs] if unanswered else interrupted.jobs))

    async def _set_entries(self, entries: list[int], *, dropped: str | None = None) -> None:
        """Pending again (None), or ended as dropped for ``dropped``."""
        assert self.inbox is not None
        try:
            for entry in entries:
                if dropped is None:
                    await self.inbox.reopen(entry, "interrupted: answered with newer messages")
                else:
                    await self.inbox.finish(entry, InboxState.DROPPED, dropped)
        except Exception as exc:
            log.warning("inbox.update_failed", entries=entries, error=str(exc))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
