"""channels/telegram/_ratelimit.py: the send pacer's per-chat and per-group token buckets."""

from __future__ import annotations

import pytest

from channels.telegram import SendPacer
from channels.telegram._ratelimit import RateLimits


class TestPacer:
    async def test_burst_then_sustained_rate(self) -> None:
        now = [0.0]
        pacer = SendPacer(RateLimits(chat_per_second=1, chat_burst=3), clock=lambda: now[0])
        for _ in range(3):  # a normal exchange is never delayed
            assert await pacer.acquire("c", group=False) == 0
        bucket = pacer._chats["c"]
        assert bucket.delay(now[0]) == pytest.approx(1.0)
        now[0] += 1.0
        assert await pacer.acquire("c", group=False) == 0

    async def test_group_budget_is_per_minute(self) -> None:
        now = [0.0]
        limits = RateLimits(chat_per_second=100, chat_burst=100, group_per_minute=20, group_burst=5)
        pacer = SendPacer(limits, clock=lambda: now[0])
        for _ in range(5):
            await pacer.acquire("g", group=True)
        assert pacer._groups["g"].delay(now[0]) == pytest.approx(3.0)

    async def test_off_never_waits_but_a_hold_does(self) -> None:
        now = [0.0]
        pacer = SendPacer(None, clock=lambda: now[0])
        for _ in range(100):
            assert await pacer.acquire("c", group=True) == 0
        pacer.hold("c", 0.05)
        now[0] = 0.1  # the clock moves while we wait: acquire sleeps, then passes
        assert await pacer.acquire("c", group=False) == 0
