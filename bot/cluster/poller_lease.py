"""One poller per bot token across processes: a Redis lock with renewal.

The lock is ``SET key me NX PX lease``; the holder renews it every third of the lease and
releases it on a clean stop, both through Lua scripts that act only while the value is still
ours (a process that stalled past its lease must not extend or delete the next holder's lock).
Locally the lease counts as held only until the moment it would expire in Redis, measured from
before the command was sent, so a process cut off from Redis stops polling before another one
may start. The key is derived from a hash of the token: a token never goes to Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

import structlog

from agent_core import cancel_and_wait, stop_if_cancelled
from bot.cluster.connection import RELEASE_IF_HELD, RENEW_IF_HELD, RedisLink

log = structlog.get_logger(__name__)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:24]


class PollerLease:
    """This process's claim on polling one bot; satisfies :class:`channels.protocol.PollGate`."""

    def __init__(self, link: RedisLink, channel: str, token: str) -> None:
        self.link = link
        self.channel = channel
        self.key = link.key("poller", channel, token_digest(token))
        self._lease_ms = int(link.lease_seconds * 1000)
        self._held_until = 0.0  # monotonic
        self._turn = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def holds(self) -> bool:
        return time.monotonic() < self._held_until

    async def wait_turn(self) -> None:
        self._ensure_running()
        while not self.holds():
            self._turn.clear()
            await self._turn.wait()

    def _ensure_running(self) -> None:
        # Started lazily, by the first poll: a channel in webhook mode never competes.
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name=f"cluster:poller:{self.channel}")

    @property
    def _retry_every(self) -> float:
        # How quickly a waiting process notices the lock is free: at most a second late.
        return min(1.0, self.link.lease_seconds / 10)

    async def _run(self) -> None:
        client = self.link.client
        me = self.link.process_id
        while True:
            sent = time.monotonic()
            try:
                if self.holds():
                    renewed = await self.link.run_script(
                        RENEW_IF_HELD, [self.key], me, self._lease_ms
                    )
                    if renewed:
                        self._held_until = sent + self.link.lease_seconds
                    else:
                        self._held_until = 0.0
                        log.warning("cluster.poller_lost", channel=self.channel)
                elif await client.set(self.key, me, nx=True, px=self._lease_ms):
                    self._held_until = sent + self.link.lease_seconds
                    log.info("cluster.poller_acquired", channel=self.channel, process=me)
                    self._turn.set()
            except Exception as exc:
                stop_if_cancelled(exc)
                # Still ours until the lease would have run out in Redis; holds() says so.
                self.link.mark(False, exc)
            stop_if_cancelled()
            await asyncio.sleep(self.link.lease_seconds / 3 if self.holds() else self._retry_every)

    def abandon(self) -> None:
        """Stop renewing without releasing: what a killed process leaves (tests use it)."""
        self._closed = True
        self._held_until = 0.0
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        """Stop renewing and hand the lock back, so another process polls at once."""
        held = self.holds()
        self.abandon()
        if self._task is not None:
            await cancel_and_wait(self._task)  # as every other wait for a stopped task
            self._task = None
        if held:
            try:
                await self.link.run_script(RELEASE_IF_HELD, [self.key], self.link.process_id)
            except Exception as exc:  # it expires by itself after the lease
                log.warning("cluster.poller_release_failed", channel=self.channel, error=repr(exc))
