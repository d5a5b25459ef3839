"""channels/pacing.py: consulting a shared pace store with a deadline, pacing in memory for a
while once it fails, and logging the outage and the recovery once each."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from structlog.testing import capture_logs

from channels.pacing import SharedPacing
from channels.protocol import PaceBucket
from tests.waiting import wait_until

BUCKETS = [PaceBucket("chat:1", 1, 1), PaceBucket("global", 30, 30)]


class FakeStore:
    """Answers ``wait``, or raises ``error``, or never answers when ``hang``."""

    def __init__(self, wait: float = 0.0) -> None:
        self.wait = wait
        self.error: Exception | None = None
        self.hang = False
        self.calls = 0
        self.taken: list[tuple[list[str], str]] = []
        self.holds: list[tuple[str, float]] = []

    async def _answer(self) -> None:
        self.calls += 1
        if self.hang:
            await asyncio.Event().wait()  # a store that never answers
        if self.error is not None:
            raise self.error

    async def take(self, buckets: Sequence[PaceBucket], *, hold: str = "") -> float:
        await self._answer()
        self.taken.append(([b.name for b in buckets], hold))
        return self.wait

    async def hold(self, name: str, seconds: float) -> None:
        await self._answer()
        self.holds.append((name, seconds))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pacing(store: FakeStore, clock: Clock, timeout: float = 0.5) -> SharedPacing:
    return SharedPacing(store, channel="telegram", timeout=timeout, retry_after=5.0, clock=clock)


async def test_the_stores_answer_is_passed_on() -> None:
    store = FakeStore(wait=0.25)
    shared = pacing(store, Clock())
    assert await shared.take(BUCKETS, hold="chat:1") == 0.25
    assert store.taken == [(["chat:1", "global"], "chat:1")]
    assert not shared.down


async def test_local_fallback_asks_the_store_again_later() -> None:
    store = FakeStore()
    store.hang = True
    clock = Clock()
    shared = pacing(store, clock, timeout=0.05)
    assert await shared.take([PaceBucket("chat:1", 1, 1)]) is None
    assert await shared.take([PaceBucket("chat:1", 1, 1)]) is None
    assert store.calls == 1
    clock.now += shared.retry_after
    assert await shared.take([PaceBucket("chat:1", 1, 1)]) is None
    assert store.calls == 2


async def test_an_outage_and_the_recovery_are_logged_once_each() -> None:
    store = FakeStore()
    store.error = ConnectionError("redis gone")
    clock = Clock()
    shared = pacing(store, clock)
    with capture_logs() as logs:
        for _ in range(3):  # three failed attempts, one retry window apart
            assert await shared.take(BUCKETS) is None
            clock.now += 5.0
        assert shared.down and store.calls == 3
        store.error = None
        assert await shared.take(BUCKETS) == 0.0
        assert await shared.take(BUCKETS) == 0.0
    assert not shared.down
    events = [entry["event"] for entry in logs]
    assert events == ["pacing.shared_unavailable", "pacing.shared_restored"]
    assert "redis gone" in logs[0]["error"] and logs[0]["channel"] == "telegram"


async def test_a_hold_is_told_to_the_store_in_the_background() -> None:
    store = FakeStore()
    shared = pacing(store, Clock())
    shared.hold("chat:1", 3.0)
    assert store.calls == 0  # not awaited by the caller, who is handling a 429
    await wait_until(lambda: store.holds == [("chat:1", 3.0)])


async def test_a_hold_the_store_does_not_answer_is_given_up() -> None:
    store = FakeStore()
    store.hang = True
    shared = pacing(store, Clock(), timeout=0.05)
    shared.hold("chat:1", 3.0)
    await wait_until(lambda: shared.down)
    assert store.calls == 1 and store.holds == []


async def test_a_failed_hold_switches_to_memory_and_holds_are_not_sent_meanwhile() -> None:
    store = FakeStore()
    store.error = ConnectionError("redis gone")
    clock = Clock()
    shared = pacing(store, clock)
    shared.hold("chat:1", 3.0)
    await wait_until(lambda: shared.down)
    store.error = None
    shared.hold("chat:1", 3.0)
    assert await shared.take(BUCKETS) is None
    assert store.calls == 1  # neither the hold nor the take asked the store
    clock.now += 5.0
    assert await shared.take(BUCKETS) == 0.0
