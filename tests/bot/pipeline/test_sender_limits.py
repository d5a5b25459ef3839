"""``MemorySenderLimiter``: a GCRA token bucket per sender, on an injected clock."""

from __future__ import annotations

import pytest

from bot.pipeline.sender_limits import NOTICE_EVERY_SECONDS, MemorySenderLimiter, Verdict


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def limiter(
    per_minute: float = 6, burst: int = 3, **kwargs: int
) -> tuple[MemorySenderLimiter, Clock]:
    clock = Clock()
    return MemorySenderLimiter(per_minute, burst, clock=clock, **kwargs), clock


async def allowed_in_a_row(limits: MemorySenderLimiter, key: str, at_most: int = 100) -> int:
    for count in range(at_most):
        if not (await limits.allow(key)).allowed:
            return count
    return at_most


async def test_a_burst_is_allowed_at_once_then_refused() -> None:
    limits, _ = limiter(per_minute=6, burst=3)
    assert await allowed_in_a_row(limits, "web:alice") == 3


async def test_a_burst_of_one_allows_a_single_message() -> None:
    limits, _ = limiter(per_minute=60, burst=1)
    assert await limits.allow("k") == Verdict(True)
    assert not (await limits.allow("k")).allowed


async def test_an_allowed_verdict_has_no_wait_and_no_notice() -> None:
    limits, _ = limiter()
    verdict = await limits.allow("k")
    assert verdict == Verdict(allowed=True, retry_after=0.0, notify=False)


async def test_retry_after_is_the_time_until_the_next_token() -> None:
    limits, clock = limiter(per_minute=6, burst=3)  # one message every 10 s
    await allowed_in_a_row(limits, "k")
    refused = await limits.allow("k")
    assert not refused.allowed
    assert refused.retry_after == pytest.approx(10.0)
    clock.advance(4)
    assert (await limits.allow("k")).retry_after == pytest.approx(6.0)


async def test_one_token_comes_back_per_interval() -> None:
    limits, clock = limiter(per_minute=6, burst=3)
    await allowed_in_a_row(limits, "k")
    clock.advance(9.9)
    assert not (await limits.allow("k")).allowed
    clock.advance(0.1)
    assert (await limits.allow("k")).allowed
    assert not (await limits.allow("k")).allowed


async def test_a_sender_who_waited_after_the_retry_after_is_allowed() -> None:
    limits, clock = limiter(per_minute=30, burst=2)
    await allowed_in_a_row(limits, "k")
    clock.advance((await limits.allow("k")).retry_after)
    assert (await limits.allow("k")).allowed


async def test_a_full_refill_allows_one_burst_not_two() -> None:
    limits, clock = limiter(per_minute=6, burst=3)
    await allowed_in_a_row(limits, "k")
    clock.advance(3600)  # idle for much longer than a refill: the bucket stays at ``burst``
    assert await allowed_in_a_row(limits, "k") == 3


async def test_refused_messages_do_not_use_up_tokens() -> None:
    limits, clock = limiter(per_minute=6, burst=3)
    await allowed_in_a_row(limits, "k")
    for _ in range(20):
        assert not (await limits.allow("k")).allowed
    clock.advance(10)
    assert (await limits.allow("k")).allowed


async def test_senders_are_limited_separately() -> None:
    limits, _ = limiter(per_minute=6, burst=2)
    assert await allowed_in_a_row(limits, "web:alice") == 2
    assert await allowed_in_a_row(limits, "web:bob") == 2
    assert await allowed_in_a_row(limits, "telegram:alice") == 2


async def test_the_first_refusal_asks_to_notify_and_the_next_ones_do_not() -> None:
    limits, clock = limiter(per_minute=6, burst=1)
    await limits.allow("k")
    assert (await limits.allow("k")).notify
    clock.advance(1)
    assert not (await limits.allow("k")).notify
    clock.advance(1)
    assert not (await limits.allow("k")).notify


async def test_notices_are_at_most_one_a_minute_even_across_streaks() -> None:
    limits, clock = limiter(per_minute=6, burst=1)
    await limits.allow("k")
    assert (await limits.allow("k")).notify  # told at t=0
    clock.advance(10)
    assert (await limits.allow("k")).allowed  # the streak ends...
    assert not (await limits.allow("k")).notify  # ...a new one inside the minute: not told again
    clock.advance(NOTICE_EVERY_SECONDS - 10)
    verdict = await limits.allow("k")
    assert verdict.allowed
    refused = await limits.allow("k")
    assert not refused.allowed
    assert refused.notify  # a minute after the last notice: told again


async def test_a_long_refused_streak_is_reminded_once_a_minute() -> None:
    limits, clock = limiter(per_minute=0.5, burst=1)  # one message every 2 minutes
    await limits.allow("k")
    notices = []
    for _ in range(12):  # 110 s of refusals, one every 10 s
        notices.append((await limits.allow("k")).notify)
        clock.advance(10)
    assert notices == [True] + [False] * 5 + [True] + [False] * 5


async def test_notices_are_per_sender() -> None:
    limits, _ = limiter(per_minute=6, burst=1)
    await limits.allow("a")
    await limits.allow("b")
    assert (await limits.allow("a")).notify
    assert (await limits.allow("b")).notify


async def test_the_clean_up_past_max_senders_keeps_the_limited_ones() -> None:
    limits, clock = limiter(per_minute=6, burst=3, max_senders=3)
    assert await allowed_in_a_row(limits, "busy") == 3  # and told: the fourth was refused
    await limits.allow("idle-1")
    await limits.allow("idle-2")
    clock.advance(10)  # the idle buckets are full again; "busy" has one token back
    await limits.allow("new")  # a fourth sender: the clean-up runs
    # "busy" keeps its state: one message, not a whole burst, and no second notice this minute.
    assert await allowed_in_a_row(limits, "busy") == 1
    assert not (await limits.allow("busy")).notify
    # A sender whose bucket is full again is a new one: a whole burst.
    assert await allowed_in_a_row(limits, "idle-1") == 3
