"""agent_core/locks.py: waiting for a shared lock with a patience, on a fake lock service."""

from __future__ import annotations

import time

import pytest

from agent_core.locks import Lease, acquire_waiting


class FakeLease:
    def __init__(self) -> None:
        self.released = False

    async def release(self) -> None:
        self.released = True


class FakeLocks:
    """Held by someone else for the first ``busy_tries`` attempts (forever when None)."""

    def __init__(self, busy_tries: int | None = 0, error: Exception | None = None) -> None:
        self.busy_tries = busy_tries
        self.error = error
        self.asked: list[str] = []
        self.lease = FakeLease()

    async def try_acquire(self, name: str) -> Lease | None:
        self.asked.append(name)
        if self.error is not None:
            raise self.error
        if self.busy_tries is None or len(self.asked) <= self.busy_tries:
            return None
        return self.lease


async def test_a_free_lock_is_taken_at_the_first_try() -> None:
    locks = FakeLocks()
    lease = await acquire_waiting(locks, "compaction:s1", patience=5.0)
    assert lease is locks.lease
    assert locks.asked == ["compaction:s1"]


async def test_waits_for_the_holder_to_release_it() -> None:
    locks = FakeLocks(busy_tries=3)
    lease = await acquire_waiting(locks, "seed:u1", patience=10.0, every=0.001)
    assert lease is locks.lease
    assert locks.asked == ["seed:u1"] * 4


async def test_no_patience_means_a_single_try() -> None:
    locks = FakeLocks(busy_tries=None)
    assert await acquire_waiting(locks, "x", patience=0.0) is None
    assert len(locks.asked) == 1


async def test_still_held_when_the_patience_runs_out_gives_none() -> None:
    locks = FakeLocks(busy_tries=None)
    started = time.monotonic()
    assert await acquire_waiting(locks, "x", patience=0.05, every=0.005) is None
    assert time.monotonic() - started >= 0.05
    assert len(locks.asked) > 1  # it retried before giving up


async def test_an_unreachable_lock_service_raises() -> None:
    locks = FakeLocks(error=ConnectionError("redis down"))
    with pytest.raises(ConnectionError, match="redis down"):
        await acquire_waiting(locks, "x", patience=1.0)
