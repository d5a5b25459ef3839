"""Named try-locks shared by the processes of a service: ``SET key holder NX PX lease``.

They back the compaction try-lock and the seed-once workspace lock
(:class:`agent_core.locks.SharedLocks`). A lock is renewed every third of
``cluster.lease_seconds`` while its holder works (a compaction may take minutes), and released
by a script that deletes it only while it is still the holder's: a holder that stalled past its
lease must not free the next holder's lock. A killed holder's lock expires after the lease.
"""

from __future__ import annotations

import asyncio
import secrets

import structlog

from agent_core import cancel_and_wait, stop_if_cancelled
from bot.cluster.connection import (
    RELEASE_IF_HELD,
    RENEW_IF_HELD,
    RedisLink,
    RedisState,
)
from bot.cluster.pacing import RedisUnavailable

log = structlog.get_logger(__name__)


class RedisLease:
    """One held lock; satisfies :class:`agent_core.locks.Lease`."""

    def __init__(self, link: RedisLink, key: str, holder: str) -> None:
        self.link = link
        self.key = key
        self.holder = holder
        self._renewal = asyncio.create_task(self._renew(), name=f"cluster:lock:{key}")

    async def _renew(self) -> None:
        lease_ms = int(self.link.lease_seconds * 1000)
        while True:
            stop_if_cancelled()
            await asyncio.sleep(self.link.lease_seconds / 3)
            try:
                kept = await self.link.run_script(RENEW_IF_HELD, [self.key], self.holder, lease_ms)
            except Exception as exc:  # the holder goes on; the lock may expire meanwhile
                stop_if_cancelled(exc)
                self.link.mark(False, exc)
                continue
            if not kept:
                log.warning("cluster.lock_lost", key=self.key)
                return

    async def release(self) -> None:
        # A run stopped while it releases its seed lock must still stop (cancel_and_wait).
        await cancel_and_wait(self._renewal)
        try:
            await self.link.run_script(RELEASE_IF_HELD, [self.key], self.holder)
        except Exception as exc:  # it expires by itself after the lease
            log.warning("cluster.lock_release_failed", key=self.key, error=repr(exc))


class RedisLocks:
    """Satisfies :class:`agent_core.locks.SharedLocks`."""

    def __init__(self, link: RedisLink) -> None:
        self.link = link

    async def try_acquire(self, name: str) -> RedisLease | None:
        if self.link.state is not RedisState.OK:
            raise RedisUnavailable("redis is down")
        key = self.link.key("lock", name)
        # Unique per acquisition, so two holders in one process are told apart too.
        holder = f"{self.link.process_id}:{secrets.token_hex(4)}"
        lease_ms = int(self.link.lease_seconds * 1000)
        if not await self.link.client.set(key, holder, nx=True, px=lease_ms):
            return None
        return RedisLease(self.link, key, holder)
