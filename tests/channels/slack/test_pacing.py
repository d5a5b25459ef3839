"""channels/slack/_pacing.py: the per-channel post pacer."""

from __future__ import annotations

import asyncio
import time

from channels.slack import PostPacer


class TestPostPacer:
    async def test_burst_passes_then_sustained_rate(self) -> None:
        pacer = PostPacer(per_second=20, burst=3)
        started = time.monotonic()
        waits = [await pacer.acquire("C1") for _ in range(6)]
        elapsed = time.monotonic() - started
        assert waits[:3] == [0.0, 0.0, 0.0]
        assert all(w > 0 for w in waits[3:])
        assert elapsed >= 3 / 20 * 0.9  # three extra posts at 20/s

    async def test_channels_are_paced_independently(self) -> None:
        pacer = PostPacer(per_second=1, burst=1)
        assert await pacer.acquire("C1") == 0.0
        assert await asyncio.wait_for(pacer.acquire("C2"), 0.5) == 0.0

    async def test_refills_over_time(self) -> None:
        now = [0.0]
        pacer = PostPacer(per_second=1, burst=2, clock=lambda: now[0])
        assert await pacer.acquire("C1") == 0.0
        assert await pacer.acquire("C1") == 0.0
        now[0] = 5.0  # long idle: the bucket is full again, not 5 tokens
        assert await pacer.acquire("C1") == 0.0
        assert await pacer.acquire("C1") == 0.0
