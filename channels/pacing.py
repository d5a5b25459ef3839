"""Consulting a shared :class:`~channels.protocol.PaceStore` without ever depending on it.

With several processes, a pacer asks the store (Redis) for its tokens. A send must never wait
on a store that is gone: every call has a short deadline, and once one fails the pacer paces in
memory for a while before it asks again. The outage is logged once, and so is the recovery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import structlog

from channels.protocol import PaceBucket, PaceStore

log = structlog.get_logger(__name__)

STORE_TIMEOUT = 0.5
"""A store slower than this counts as down: pacing in memory beats a send stuck on Redis."""
RETRY_STORE_AFTER = 5.0
"""How long the pacer paces in memory after a failure before it asks the store again."""


class SharedPacing:
    def __init__(
        self,
        store: PaceStore,
        *,
        channel: str,
        timeout: float = STORE_TIMEOUT,
        retry_after: float = RETRY_STORE_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.channel = channel
        self.timeout = timeout
        self.retry_after = retry_after
        self._clock = clock
        self._local_until = 0.0
        self.down = False
        """The last call failed: the pacer paces in memory (logged once per outage)."""
        self._tasks: set[asyncio.Task[None]] = set()

    async def take(self, buckets: Sequence[PaceBucket], *, hold: str = "") -> float | None:
        """Seconds to wait before asking again (0: the tokens are taken); None: the store is
        unavailable, pace in memory."""
        if self._clock() < self._local_until:
            return None
        try:
            wait = await asyncio.wait_for(self.store.take(buckets, hold=hold), self.timeout)
        except Exception as exc:
            self._failed(exc)
            return None
        if self.down:
            self.down = False
            log.info("pacing.shared_restored", channel=self.channel)
        return wait

    def hold(self, name: str, seconds: float) -> None:
        """Tell the other processes about a 429, in the background: the caller is in the middle
        of handling it and must not wait on Redis for that."""
        if self._clock() < self._local_until:
            return
        task = asyncio.get_running_loop().create_task(self._hold(name, seconds))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hold(self, name: str, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.store.hold(name, seconds), self.timeout)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        self._local_until = self._clock() + self.retry_after
        if not self.down:
            self.down = True
            log.warning("pacing.shared_unavailable", channel=self.channel, error=repr(exc))
