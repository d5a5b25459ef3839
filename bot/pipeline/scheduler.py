"""Per-session queues and concurrency, independent of any platform.

Each session has one lane: a bounded queue (oldest dropped when full) and a concurrency limit
(1 for DMs so answers stay in order, up to 3 in groups where people talk over each other).
Over all lanes at most ``max_running`` runs go at once (``bot.max_concurrent_runs``): a burst
of many chats then waits as queued jobs, a few hundred bytes each, instead of as half-done runs
that each hold a prompt, a history and a model request. Lanes that wait for a free slot get it
in the order they began to wait, so a busy chat cannot keep the others out.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

import structlog

log = structlog.get_logger(__name__)


class Schedulable(Protocol):
    @property
    def session_key(self) -> str: ...
    @property
    def concurrency(self) -> int: ...


J = TypeVar("J", bound=Schedulable)


@dataclass
class _Lane(Generic[J]):
    queue: deque[J] = field(default_factory=deque)
    running: set[asyncio.Task[None]] = field(default_factory=set)


class Scheduler(Generic[J]):
    def __init__(
        self,
        execute: Callable[[J], Coroutine[Any, Any, None]],
        *,
        queue_cap: int = 10,
        max_running: int | None = None,
        on_drop: Callable[[J], Coroutine[Any, Any, None]] | None = None,
        on_done: Callable[[J], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """``execute`` runs a job (the turn); ``on_done`` follows it however it ended, before
        its lane takes the next job; ``on_drop`` gets a job that will never run;
        ``max_running``: runs at once over all sessions (None: no limit)."""
        self._execute = execute
        self._on_drop = on_drop
        self._on_done = on_done
        self.queue_cap = queue_cap
        self.max_running = max_running
        self._lanes: dict[str, _Lane[J]] = {}
        self._running = 0
        self._waiting: dict[str, None] = {}
        """Sessions whose next job could start but for ``max_running``, oldest first."""
        self._background: set[asyncio.Task[None]] = set()
        self._held = False
        self.on_idle: Callable[[str], None] | None = None
        """Told of a session that has nothing left waiting or running here."""

    def submit(self, job: J) -> None:
        lane = self._lanes.setdefault(job.session_key, _Lane())
        if len(lane.queue) >= self.queue_cap:
            dropped = lane.queue.popleft()
            log.warning("queue.dropped_oldest", session_key=job.session_key, cap=self.queue_cap)
            self._notify_drop(dropped)
        lane.queue.append(job)
        self._pump(job.session_key)

    def starts_at_once(self, session_key: str, concurrency: int) -> bool:
        """Whether a job submitted now to ``session_key`` would start without queueing."""
        lane = self._lanes.get(session_key)
        if self._held or not self._slot_for(session_key):
            return False
        return lane is None or (not lane.queue and len(lane.running) < concurrency)

    def queued(self, session_key: str) -> list[J]:
        lane = self._lanes.get(session_key)
        return list(lane.queue) if lane else []

    def replace_queued(self, old: J, new: J) -> bool:
        """Put ``new`` in the queue where ``old`` waits (a burst merged into it, see
        ``bot/pipeline/bursts.py``); False when ``old`` is not queued."""
        lane = self._lanes.get(old.session_key)
        if lane is None:
            return False
        for i, job in enumerate(lane.queue):
            if job is old:
                lane.queue[i] = new
                return True
        return False

    def drop_queued(self, session_key: str, predicate: Callable[[J], bool]) -> list[J]:
        """Remove matching queued (not yet running) jobs; returns them."""
        lane = self._lanes.get(session_key)
        if lane is None:
            return []
        dropped = [job for job in lane.queue if predicate(job)]
        lane.queue = deque(job for job in lane.queue if not predicate(job))
        for job in dropped:
            self._notify_drop(job)
        if not lane.queue:
            self._waiting.pop(session_key, None)
        self._forget_if_idle(session_key)
        return dropped

    def _notify_drop(self, job: J) -> None:
        if self._on_drop is not None:
            task = asyncio.create_task(self._on_drop(job))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def hold(self) -> None:
        """Start nothing new (graceful shutdown): queued jobs stay queued, running ones go on."""
        self._held = True

    async def wait_running(self, grace: float) -> int:
        """Wait up to ``grace`` seconds for the running jobs; returns how many still run."""
        running = {t for lane in self._lanes.values() for t in lane.running}
        if running and grace > 0:
            _, pending = await asyncio.wait(running, timeout=grace)
            return len(pending)
        return len(running)

    def _pump(self, session_key: str) -> None:
        lane = self._lanes.get(session_key)
        if lane is None or self._held:
            return
        while lane.queue and len(lane.running) < lane.queue[0].concurrency:
            if not self._slot_for(session_key):
                self._waiting.setdefault(session_key)
                break
            self._waiting.pop(session_key, None)
            job = lane.queue.popleft()
            task = asyncio.create_task(self._run(job), name=f"run:{session_key}")
            lane.running.add(task)
            self._running += 1
            task.add_done_callback(partial(self._finished, session_key))
        self._forget_if_idle(session_key)

    def _slot_for(self, session_key: str) -> bool:
        """Whether a run of ``session_key`` may start now as far as ``max_running`` goes: a
        slot is free and no other session waits for one before it."""
        if self.max_running is None:
            return True
        if self._running >= self.max_running:
            return False
        return not self._waiting or next(iter(self._waiting)) == session_key

    def _pump_waiting(self) -> None:
        while self._waiting and (self.max_running is None or self._running < self.max_running):
            session_key = next(iter(self._waiting))
            started = self._running
            self._pump(session_key)
            if self._running == started:  # emptied or at its own limit meanwhile
                self._waiting.pop(session_key, None)

    async def _run(self, job: J) -> None:
        try:
            await self._execute(job)
        finally:
            if self._on_done is not None:
                await self._on_done(job)

    def _finished(self, session_key: str, task: asyncio.Task[None]) -> None:
        lane = self._lanes.get(session_key)
        if lane is not None and task in lane.running:
            lane.running.discard(task)
            self._running -= 1
        if not task.cancelled() and task.exception() is not None:
            log.error("run.task_crashed", session_key=session_key, error=repr(task.exception()))
        self._pump(session_key)  # behind the sessions already waiting for a slot, if any
        self._pump_waiting()

    def _forget_if_idle(self, session_key: str) -> None:
        # Idle sessions cost nothing: thousands of quiet chats must not hold lanes.
        lane = self._lanes.get(session_key)
        if lane is not None and not lane.queue and not lane.running:
            del self._lanes[session_key]
            if self.on_idle is not None:
                self.on_idle(session_key)

    @property
    def sessions(self) -> set[str]:
        return set(self._lanes)

    @property
    def waiting_for_slot(self) -> int:
        """Sessions whose next job waits for a slot under ``max_running``."""
        return len(self._waiting)

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    async def aclose(self) -> None:
        """Cancel everything still queued or running (shutdown)."""
        tasks = [t for lane in self._lanes.values() for t in lane.running] + list(self._background)
        for lane in self._lanes.values():
            lane.queue.clear()
        self._waiting.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
