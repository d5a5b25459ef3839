"""Work distribution: which process answers a message, when several share one inbox.

Any process may receive a message (a webhook, the elected poller). One process at a time holds
a session (``session_leases.py``), so a chat is answered in order while different chats
spread over the processes. A message for a session this process holds, or takes as the
message arrives (nobody held it), is stored as this process's own and runs at once, as in one
process (``hold``): no claim, no nudge. Once nothing of a session waits or runs here, this
process hands it back (``went_idle``), so the chat's next message is answered by whichever
process receives it, without waking this one. A message for a session another process holds
is stored *unowned*; the receiver nudges the holder (``<prefix>:work:<holder>``), which
claims every claimable entry of it, oldest first (``SqlInbox.claim_session``: ``FOR UPDATE
SKIP LOCKED``) and queues them in its per-session scheduler. The elected poller, the only
receiver of its bot's updates, assigns a session nobody holds to a member instead of taking
it (``members.py``), so a polling cluster spreads its chats as a webhook one does.

Nothing depends on a nudge arriving: every process sweeps the inbox every third of a lease
(at most 5 s) for entries nobody holds, stored over a second ago (a lost nudge, a session
whose holder went idle, a dead process's work once its leases ran out), and claims the
sessions it can take. A claimed entry that an earlier process had started goes through the
replay path, which resumes delivery at the next undelivered chunk. While Redis is down, no
session can be taken: the entries wait, nothing is lost, and the first sweep after Redis is
back claims them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from contextlib import suppress
from datetime import timedelta
from typing import Any

import structlog

from agent_core import stop_if_cancelled
from bot.cluster.connection import RedisLink, RedisState
from bot.cluster.members import Members
from bot.cluster.session_leases import SessionLeases
from bot.pipeline.job import Job
from bot.pipeline.ports import Pipeline
from bot.pipeline.replay import requeue
from bot.pipeline.session_keys import chat_of
from bot.storage.inbox import InboxEntry, SqlInbox
from bot.storage.models import utcnow

log = structlog.get_logger(__name__)

SETTLE_SECONDS = 1.0
"""The sweep leaves an unowned entry to its receiver this long after it was stored (by the
receiver's clock): a nudge normally lands in milliseconds, and a lost one is the rare case the
sweep is for. Clocks apart by more than this shift it by their difference, no more."""


KEEPING_SECONDS = 10.0
"""How long a message kept here may take to be stored before its session may be handed back
anyway (a store that failed, or found a duplicate, tells nobody)."""


class ClusterWork:
    """Satisfies :class:`bot.pipeline.ports.WorkClaims`; ``attach`` gives it the pipeline it
    feeds (:class:`bot.pipeline.ports.Pipeline`)."""

    def __init__(
        self,
        link: RedisLink,
        inbox: SqlInbox,
        *,
        max_age: float,
        spreads: Callable[[], bool] = lambda: False,
        polled: Callable[[str], bool] = lambda channel: False,
    ) -> None:
        self.link = link
        self.inbox = inbox
        self.max_age = max_age
        self.leases = SessionLeases(link)
        self.members = Members(link)
        self.spreads = spreads
        """Whether a session nobody holds, of a message received here, goes to a member chosen
        by its key instead of this process: the only receiver, the elected poller, spreads."""
        self.polled = polled
        """Whether a channel's updates reach the cluster through one elected poller: its
        chats are not handed back when idle (the poller sends their next messages to the same
        process anyway)."""
        self.channel = link.key("work", link.process_id)
        self._pipeline: Pipeline | None = None
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # lock, claims using it
        self._tasks: set[asyncio.Task[None]] = set()
        self._received: dict[int, Job] = {}
        """Jobs of messages received here, by inbox entry, until a claim queues them: a later
        claim of this process (of an earlier message, a nudge) must queue *that* job, whose
        completion its caller may be waiting for."""
        self._listener: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._keeping: dict[Job, float] = {}
        """Jobs whose message is being stored as this process's own, until when at most."""
        self.claimed = 0  # entries claimed since start (health, tests)
        self.kept_count = 0  # messages received for a session held or taken here: no claim

    @property
    def sweep_every(self) -> float:
        # A dead process's work is taken over within a lease plus one sweep.
        return min(5.0, self.link.lease_seconds / 3)

    async def attach(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._listener = asyncio.create_task(self._listen(), name="cluster:work")
        self._renewer = asyncio.create_task(self._renew_forever(), name="cluster:renew")
        await asyncio.wait_for(self._subscribed.wait(), timeout=10)
        await self.members.refresh()
        await self._tell_members()

    async def leave(self) -> None:
        """No longer a member (a drain): new sessions are assigned to the others from now."""
        if not self.members.left:
            await self.members.leave()
            await self._tell_members()

    async def _tell_members(self) -> None:
        # Otherwise a poller would learn of a member joining or leaving only at its next
        # renewal, up to a third of a lease later.
        for member in self.members.live:
            if member != self.link.process_id:
                await self._send(member, {"op": "members"})

    def holds(self, session_key: str) -> bool:
        """Whether this process holds ``session_key`` for a message received now, without
        asking Redis."""
        # A claim under way here (a nudge: a peer stored an earlier message) must queue that
        # one first. Half a lease left means the renewer, every third of a lease, extends it
        # once the job makes it busy.
        return (
            session_key not in self._locks
            and self.leases.left(session_key) > self.link.lease_seconds / 2
        )

    async def hold(self, job: Job) -> bool:
        """Whether ``job``'s message is kept here (see
        :meth:`bot.pipeline.ports.WorkClaims.hold`): its session is held already, or taken now
        when nobody holds it. Taking it before the store turns a moved message's claim, and
        its holder's wake-up, into the store it needs anyway."""
        session_key = job.session_key
        if not self.holds(session_key):
            if session_key in self._locks:
                return False  # a claim here queues the older entries first
            target = self.members.target(session_key) if self.spreads() else None
            if target not in (None, self.link.process_id):
                return False  # the poller assigns it once it is stored (dispatch)
            if self.link.state is not RedisState.OK:
                return False  # stored unowned: the first sweep after Redis is back claims it
            if await self.leases.take(session_key) is not None:
                return False  # held elsewhere: stored unowned, and the holder nudged
        # Until it is stored: the session's last run ending meanwhile must not hand the
        # session back under it (a peer would store the next message behind this one and
        # leave it to a sweep).
        self._keeping[job] = asyncio.get_running_loop().time() + KEEPING_SECONDS
        return True

    def went_idle(self, session_key: str) -> None:
        """Hand the session back once nothing of it waits or runs here, when another process
        could take it and would receive its next message (a member alone keeps it, and so
        does the member a poller assigned it to)."""
        pipeline = self._pipeline
        now = asyncio.get_running_loop().time()
        for job, until in list(self._keeping.items()):
            if until <= now:
                del self._keeping[job]  # its store failed or found a duplicate
            elif job.session_key == session_key:
                return  # stored in a moment, and run here
        if (
            pipeline is None
            or session_key in self._locks  # a claim here is about to queue more of it
            or session_key in pipeline.busy_sessions()  # a debounce window holds some
            or self._polled(session_key)
            or len(self.members.live) < 2
            or not self.leases.holds(session_key)
        ):
            return
        self.leases.release_soon(session_key)

    def _polled(self, session_key: str) -> bool:
        chat = chat_of(session_key)
        return chat is not None and self.polled(chat.channel)

    def kept(self, job: Job) -> None:
        self._keeping.pop(job, None)
        self.kept_count += 1

    def dispatch(self, job: Job) -> None:
        """``job``'s message is stored unowned: claim its session now, in the background (the
        platform is acknowledged meanwhile)."""
        self._keeping.pop(job, None)
        if job.inbox_id is not None:
            self._received[job.inbox_id] = job
        self._claim_later(job.session_key, assign=True)

    def claim_soon(self, session_key: str) -> None:
        """Claim ``session_key`` in the background: its new unowned entries (a scheduled
        occurrence) are queued here if this process gets the session, else by its holder."""
        self._claim_later(session_key)

    async def claim(self, session_key: str, *, nudged: bool = False) -> int:
        """Take ``session_key`` and queue its claimable entries; returns how many.

        ``nudged``: another process's take found this one holding the session a moment ago
        (Redis said so); while more than half of our lease is left the take is skipped. The
        session is busy once the claim queues its entry, so the renewer (every third of a
        lease) extends it before it could run out, as it would after a take."""
        self._register(session_key)
        return await self._claim_registered(session_key, nudged=nudged)

    def _claim_later(self, session_key: str, *, nudged: bool = False, assign: bool = False) -> None:
        # Registered now, not when the task starts: until the claim has queued what it found,
        # holds() must not let a newer message of the session run before it.
        self._register(session_key)
        self._spawn(self._claim_registered(session_key, nudged=nudged, assign=assign))

    def _register(self, session_key: str) -> None:
        lock, users = self._locks.get(session_key) or (asyncio.Lock(), 0)
        self._locks[session_key] = (lock, users + 1)

    async def _claim_registered(
        self, session_key: str, *, nudged: bool, assign: bool = False
    ) -> int:
        lock = self._locks[session_key][0]
        pipeline = self._pipeline
        nudge = (self.link.key("work", ""), json.dumps({"op": "claim", "session": session_key}))
        try:
            if pipeline is None or not pipeline.accepting:
                return 0
            # Claims of one session run one after the other here, so they queue in order.
            async with lock:
                confirmed = nudged and self.leases.left(session_key) > self.link.lease_seconds / 2
                target = self.members.target(session_key) if assign and self.spreads() else None
                holder = (
                    None
                    if confirmed
                    else await self.leases.take(session_key, nudge=nudge, assign_to=target)
                )
                if holder is not None:
                    # The holder answers them; a live one was nudged by the take itself (a
                    # lost nudge costs at most one sweep: its sweep finds the entry anyway).
                    self._forget_received(session_key)
                    return 0
                started = None
                if pipeline.idle(session_key):
                    # Its first entry runs at once: the claim marks it running too, instead of
                    # the turn's own write a moment later (one round trip less per message a
                    # peer received).
                    entries, started = await self.inbox.claim_and_start(session_key)
                else:
                    entries = await self.inbox.claim_session(session_key)
                await self._queue(pipeline, entries, started)
                self.claimed += len(entries)
                return len(entries)
        except Exception as exc:  # the entries stay in the inbox; the next sweep retries
            log.warning("cluster.claim_failed", session_key=session_key, error=repr(exc))
            return 0
        finally:
            lock, users = self._locks[session_key]
            if users == 1:
                del self._locks[session_key]
            else:
                self._locks[session_key] = (lock, users - 1)

    def _forget_received(self, session_key: str) -> None:
        for entry_id, job in list(self._received.items()):
            if job.session_key == session_key:
                del self._received[entry_id]
                job.settle(None)  # nothing runs here; whoever waits must not wait forever

    async def _queue(
        self, pipeline: Pipeline, entries: list[InboxEntry], started: int | None = None
    ) -> None:
        for entry in entries:
            job = self._received.pop(entry.id, None)
            fresh = entry.attempts == 0 or entry.id == started
            if job is not None:
                job.started = entry.id == started
                pipeline.submit(job)  # received here: bursts merge as in one process
            elif fresh and entry.answer is None and pipeline.has_channel(entry.channel):
                # A peer received it a moment ago.
                pipeline.resubmit(entry, replayed=False, started=entry.id == started)
                log.info("cluster.claimed", entry=entry.id, session_key=entry.session_key)
            else:  # an earlier process started it: resume where it stopped
                await requeue(pipeline, self.inbox, [entry], max_age=self.max_age)
        if entries:
            # No live peer holds this session (claim_session claimed), so an older message
            # received here and not claimed now was answered elsewhere: nothing runs it here.
            last = entries[-1].id
            session_key = entries[-1].session_key
            for entry_id, job in list(self._received.items()):
                if job.session_key == session_key and entry_id < last:
                    del self._received[entry_id]
                    job.settle(None)

    async def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> None:
        """``/stopall`` received here: the session's holder, if another process, drops what
        waits there (its running runs are cancelled through the run registry)."""
        holder = await self.leases.holder(session_key)
        if holder and holder != self.link.process_id:
            request = {"op": "drop", "session": session_key, "sender": sender, "admin": admin}
            await self._send(holder, request)

    async def _send(self, process: str, message: dict[str, Any]) -> None:
        try:
            await self.link.client.publish(self.link.key("work", process), json.dumps(message))
        except Exception as exc:
            self.link.mark(False, exc)

    def _on_message(self, data: bytes | str) -> None:
        try:
            message = json.loads(data)
            op = message["op"]
            if op == "members":  # one joined or left: a poller must know at once
                self._spawn(self.members.refresh())
                return
            session_key = str(message["session"])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cluster.work_bad_message", error=repr(exc))
            return
        if op == "claim":
            self._claim_later(session_key, nudged=True)
        elif op == "drop" and self._pipeline is not None:
            dropped = self._pipeline.drop_waiting(
                session_key, str(message.get("sender", "")), admin=bool(message.get("admin"))
            )
            log.info("cluster.dropped_waiting", session_key=session_key, dropped=len(dropped))

    async def sweep(self) -> int:
        """Keep what this process holds; claim the sessions nobody holds. Returns how many
        entries were claimed."""
        pipeline = self._pipeline
        if pipeline is None:
            return 0
        claimed = 0
        if pipeline.accepting:
            # Under load, many entries are unowned for the moment between their receiver
            # storing them and its claim or its nudge's: claiming those too would take their
            # session again and nudge the holder a second time, for nothing.
            settled = utcnow() - timedelta(seconds=SETTLE_SECONDS)
            for session_key in await self.inbox.claimable_sessions(settled):
                claimed += await self.claim(session_key)
        return claimed

    async def renew(self) -> None:
        """Extend the leases of what this process works on: its busy sessions in Redis, its
        pending entries in the inbox."""
        if self._pipeline is not None:
            await self.leases.renew(self._pipeline.busy_sessions())
        await self.inbox.renew_leases()
        await self.members.refresh()

    async def _renew_forever(self) -> None:
        # On a clock of its own, not after each sweep: a long sweep (many sessions to claim,
        # a slow database) must not let this process's leases run out while it works.
        every = self.link.lease_seconds / 3
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            stop_if_cancelled()
            next_at += every
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            try:
                await self.renew()
            except Exception as exc:
                stop_if_cancelled(exc)
                log.warning("cluster.renew_failed", error=repr(exc))
            next_at = max(next_at, loop.time() - every)  # after a stall, no burst of renewals

    def health(self) -> dict[str, int]:
        return {
            "sessions": len(self.leases.held),
            "claimed": self.claimed,
            "kept": self.kept_count,
            "members": len(self.members.live),
        }

    async def _listen(self) -> None:
        async def subscribed() -> None:
            self._subscribed.set()

        await self.link.listen(self.channel, self._on_message, subscribed)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Stop claiming and hand the sessions back (after the pipeline released its entries),
        so other processes take them at once instead of after a lease."""
        tasks = [t for t in (self._listener, self._renewer, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._listener = self._renewer = None
        await self.leave()
        with suppress(Exception):
            await self.inbox.release_queued()
        await self.leases.release_all()
