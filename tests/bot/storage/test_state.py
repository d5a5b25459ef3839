"""bot/storage/_state.py: channel state and the dedupe store, on both backends."""

from __future__ import annotations

import asyncio

from bot.storage import Database, SqlChannelState, SqlDedupeStore
from tests.storage_support import Backend


async def test_channel_state_upsert(db: Database) -> None:
    state = SqlChannelState(db)
    assert await state.get("telegram", "offset") is None
    await state.set("telegram", "offset", "41")
    await state.set("telegram", "offset", "42")
    await state.set("slack", "offset", "x")
    assert await state.get("telegram", "offset") == "42"
    assert await state.get("slack", "offset") == "x"


async def test_dedupe_persists_across_reopen(backend: Backend) -> None:
    async with await backend.open() as db:
        dedupe = SqlDedupeStore(db)
        assert await dedupe.seen("telegram:1:100") is False
        assert await dedupe.seen("telegram:1:100") is True
        assert await dedupe.seen("telegram:1:101") is False
        long_key = "k" * 1000
        assert await dedupe.seen(long_key) is False
    async with await backend.open() as db:
        dedupe = SqlDedupeStore(db)
        assert await dedupe.seen("telegram:1:100") is True
        assert await dedupe.seen(long_key) is True


async def test_dedupe_concurrent_seen_admits_one(db: Database) -> None:
    dedupe = SqlDedupeStore(db)
    results = await asyncio.gather(*(dedupe.seen("same") for _ in range(8)))
    assert results.count(False) == 1


async def test_has_seen_looks_a_key_up_without_recording_it(db: Database) -> None:
    dedupe = SqlDedupeStore(db)
    assert await dedupe.has_seen("telegram:update:1") is False
    assert await dedupe.seen("telegram:update:1") is False  # the look-up recorded nothing
    assert await dedupe.has_seen("telegram:update:1") is True
    assert await dedupe.has_seen("telegram:update:2") is False


async def test_dedupe_prune(db: Database) -> None:
    await SqlDedupeStore(db).seen("old")
    assert await SqlDedupeStore(db).prune() == 0  # within the default TTL
    expired = SqlDedupeStore(db, ttl_seconds=0)
    assert await expired.prune() == 1
    assert await expired.seen("old") is False
