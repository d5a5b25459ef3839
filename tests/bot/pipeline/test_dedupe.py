"""``MemoryDedupe`` (seen/forget, TTL, size bound) and ``first_delivery``, the gateway's check."""

from __future__ import annotations

import types

import pytest

from bot.pipeline import dedupe
from bot.pipeline.dedupe import MemoryDedupe, first_delivery
from channels import NotAccepted


class Clock:
    def __init__(self, now: float = 500.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The module's clock only (``time.monotonic`` stays real for the event loop)."""
    fake = Clock()
    monkeypatch.setattr(dedupe, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


async def test_a_key_is_new_once_then_seen() -> None:
    store = MemoryDedupe()
    assert await store.seen("web:m1") is False
    assert await store.seen("web:m1") is True
    assert await store.seen("web:m1") is True


async def test_keys_are_remembered_separately() -> None:
    store = MemoryDedupe()
    assert await store.seen("a") is False
    assert await store.seen("b") is False
    assert await store.seen("a") is True
    assert await store.seen("b") is True


async def test_forget_makes_a_key_new_again() -> None:
    store = MemoryDedupe()
    await store.seen("a")
    await store.seen("b")
    await store.forget("a")
    assert await store.seen("a") is False
    assert await store.seen("b") is True


async def test_forgetting_an_unknown_key_is_harmless() -> None:
    store = MemoryDedupe()
    await store.forget("never-seen")
    assert await store.seen("never-seen") is False


async def test_a_key_older_than_the_ttl_is_new_again(clock: Clock) -> None:
    store = MemoryDedupe(ttl_seconds=60)
    await store.seen("a")
    clock.now += 59.9
    assert await store.seen("a") is True
    clock.now += 0.1
    assert await store.seen("a") is False
    # Recorded again at that time: seen for another TTL.
    clock.now += 59.9
    assert await store.seen("a") is True


async def test_the_ttl_counts_from_the_first_sighting_not_the_repeats(clock: Clock) -> None:
    store = MemoryDedupe(ttl_seconds=60)
    await store.seen("a")
    clock.now += 50
    assert await store.seen("a") is True  # a repeat does not refresh the entry
    clock.now += 10
    assert await store.seen("a") is False


async def test_expiry_only_drops_the_expired_keys(clock: Clock) -> None:
    store = MemoryDedupe(ttl_seconds=60)
    await store.seen("old")
    clock.now += 30
    await store.seen("young")
    clock.now += 30  # "old" is 60 s old, "young" 30 s
    assert await store.seen("young") is True
    assert await store.seen("old") is False


async def test_past_max_entries_the_oldest_keys_are_dropped() -> None:
    store = MemoryDedupe(max_entries=3)
    for key in ("a", "b", "c", "d"):
        assert await store.seen(key) is False
    assert await store.seen("d") is True
    assert await store.seen("c") is True
    assert await store.seen("a") is False  # dropped to make room for "d"


async def test_the_store_never_holds_more_than_max_entries() -> None:
    store = MemoryDedupe(max_entries=5)
    for i in range(50):
        await store.seen(f"k{i}")
    # Only the most recent ones are still duplicates.
    remembered = [i for i in range(50) if await store.seen(f"k{i}")]
    assert len(remembered) <= 5


async def test_a_repeat_of_the_oldest_key_of_a_full_store_is_still_a_duplicate() -> None:
    # It used to make room before looking the key up: the oldest key evicted itself.
    store = MemoryDedupe(max_entries=2)
    await store.seen("a")
    await store.seen("b")
    assert await store.seen("a") is True


class FailingStore:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def seen(self, key: str) -> bool:
        self.calls.append(key)
        raise ConnectionError("database is down")

    async def forget(self, key: str) -> None:
        raise AssertionError("not expected")


async def test_first_delivery_is_true_then_false_for_a_redelivery() -> None:
    store = MemoryDedupe()
    assert await first_delivery(store, "telegram:1:99") is True
    assert await first_delivery(store, "telegram:1:99") is False
    assert await first_delivery(store, "telegram:1:100") is True


async def test_first_delivery_records_the_key_in_the_store() -> None:
    store = MemoryDedupe()
    await first_delivery(store, "k")
    assert await store.seen("k") is True


async def test_a_store_that_fails_makes_the_message_not_accepted() -> None:
    store = FailingStore()
    with pytest.raises(NotAccepted) as raised:
        await first_delivery(store, "k")
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert store.calls == ["k"]
