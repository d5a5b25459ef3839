"""Per-conversation pacing of posts: a token bucket per Slack channel.

Slack allows about one message per second per channel and answers bursts with 429. A token
bucket keeps the sustained rate under that while letting a short burst (a reply split into a few
chunks, a command answer) go out at once, so a normal conversation never waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_TRACKED = 10_000  # idle buckets beyond this are forgotten (they would be full anyway)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class PostPacer:
    def __init__(
        self, per_second: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
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
