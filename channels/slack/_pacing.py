"""Per-conversation pacing of posts: a token bucket per Slack channel.

Slack allows about one message per second per channel and answers bursts with 429. A token
bucket keeps the sustained rate under that while letting a short burst (a reply split into a few
chunks, a command answer) go out at once, so a normal conversation never waits.

With several processes (``shared``), the buckets live in a :class:`~channels.protocol.PaceStore`
they all consult, so together they post no faster than one would; while it is unreachable
each process paces in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from channels.pacing import SharedPacing
from channels.protocol import PaceBucket, PaceStore

MAX_TRACKED = 10_000  # idle buckets beyond this are forgotten (they would be full anyway)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class PostPacer:
    def __init__(
        self,
        per_second: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        shared: PaceStore | None = None,
        channel: str = "slack",
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
        self.shared = (
            SharedPacing(shared, channel=channel, clock=clock) if shared is not None else None
        )
        self._buckets: dict[str, _Bucket] = {}

    async def acquire(self, key: str) -> float:
        """Wait for one post slot in ``key``; returns the seconds waited."""
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._forget_idle()
            bucket = self._buckets[key] = _Bucket(float(self.burst), self._clock())
        waited = 0.0
        async with bucket.lock:  # posts to one channel leave in arrival order
            while True:
                if self.shared is not None:
                    spec = PaceBucket(f"channel:{key}", self.per_second, self.burst)
                    wait = await self.shared.take([spec])
                    if wait is not None:
                        if wait <= 0:
                            return waited
                        waited += wait
                        await asyncio.sleep(wait)
                        continue
                now = self._clock()
                bucket.tokens = min(
                    float(self.burst), bucket.tokens + (now - bucket.updated) * self.per_second
                )
                bucket.updated = now
                if bucket.tokens >= 1.0:
                    bucket.tokens -= 1.0
                    return waited
                delay = (1.0 - bucket.tokens) / self.per_second
                waited += delay
                await asyncio.sleep(delay)

    def _forget_idle(self) -> None:
        for key, bucket in list(self._buckets.items()):
            if not bucket.lock.locked():
                del self._buckets[key]
