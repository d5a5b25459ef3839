"""Locks and the dedupe fast path shared by processes (issue 17, point 5), on a real Redis: two
``RedisLink``s are two processes. The compaction try-lock, the seed-once workspace lock and
the dedupe fast path each behave as one across them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agent_core.bootstrap import SEED_MARKER, STANDARD_FILES, Workspaces
from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.dedupe import FastDedupe
from bot.cluster.locks import RedisLease, RedisLocks
from tests.agent_core.test_compaction import RoleProvider, pairs
from tests.agent_core.test_loop import make_loop, request
from tests.cluster_support import REDIS_URL, ClusterConfig, needs_postgres, needs_redis
from tests.inbound_support import MemorySeen
from tests.waiting import wait_until

pytestmark = [needs_redis]

LEASE = 0.6


@pytest.fixture
async def links(redis_prefix: str) -> AsyncIterator[tuple[RedisLink, RedisLink]]:
    async with AsyncExitStack() as stack:
        pair = []
        for _ in range(2):
            link = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=LEASE)
            stack.push_async_callback(link.aclose)
            await link.start()
            pair.append(link)
        yield pair[0], pair[1]


# -- the locks -----------------------------------------------------------------------------------


async def test_a_lock_held_in_one_process_is_renewed_and_refused_to_the_other(
    links: tuple[RedisLink, RedisLink],
) -> None:
    a, b = RedisLocks(links[0]), RedisLocks(links[1])
    held = await a.try_acquire("compaction:s1")
    assert held is not None
    # Kept (the test times the lease): past the lease, only renewal keeps it.
    await asyncio.sleep(LEASE * 2.5)
    assert await b.try_acquire("compaction:s1") is None
    other = await b.try_acquire("compaction:s2")  # another name is free
    assert other is not None
    await held.release()
    again = await b.try_acquire("compaction:s1")
    assert again is not None
    await other.release()
    await again.release()


async def test_a_dead_holders_lock_expires_after_the_lease(
    links: tuple[RedisLink, RedisLink],
) -> None:
    a, b = RedisLocks(links[0]), RedisLocks(links[1])
    held = await a.try_acquire("seed:x")
    assert isinstance(held, RedisLease)
    held._renewal.cancel()  # killed: no renewal, no release
    assert await b.try_acquire("seed:x") is None
    await asyncio.sleep(LEASE + 0.1)  # kept: the test times the lease's expiry
    taken = await b.try_acquire("seed:x")
    assert taken is not None
    await held.release()  # too late: must not free the new holder's lock
    assert await a.try_acquire("seed:x") is None
    await taken.release()


# -- compaction ----------------------------------------------------------------------------------


async def test_a_session_is_compacted_by_one_process_at_a_time(
    links: tuple[RedisLink, RedisLink], tmp_path: Path
) -> None:
    provider = RoleProvider(delay=0.5)  # the summary takes a while: both runs end meanwhile
    loop_a, store, _ = make_loop(tmp_path, provider)
    loop_b, _, _ = make_loop(tmp_path, provider)
    loop_b.store = loop_b.context.store = store  # one shared database
    loop_a.context.compactor.locks = RedisLocks(links[0])
    loop_b.context.compactor.locks = RedisLocks(links[1])
    store.sessions["s1"] = pairs(30)
    await asyncio.wait_for(asyncio.gather(loop_a.run(request("a")), loop_b.run(request("b"))), 10)
    # Each process's own try-lock let its compaction start; the shared one let one through.
    assert loop_a.context.compactor.is_compacting("s1")
    assert loop_b.context.compactor.is_compacting("s1")
    idle = asyncio.gather(
        loop_a.context.compactor.wait_idle(), loop_b.context.compactor.wait_idle()
    )
    await asyncio.wait_for(idle, 10)
    assert len(provider.of("summary")) == 1
    assert store.compactions["s1"] == 1
    # Released: the next compaction of the session may run in either process.
    after = await RedisLocks(links[1]).try_acquire("compaction:s1")
    assert after is not None
    await after.release()


async def test_compaction_is_skipped_while_redis_is_down(tmp_path: Path, redis_prefix: str) -> None:
    provider = RoleProvider()
    loop, store, _ = make_loop(tmp_path, provider)
    down = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=LEASE)  # never started
    try:
        loop.context.compactor.locks = RedisLocks(down)
        store.sessions["s1"] = pairs(30)
        await loop.run(request("x"))
        await loop.context.compactor.wait_idle()
        assert provider.of("summary") == [] and not loop.context.compactor.is_compacting("s1")
    finally:
        await down.aclose()


# -- seeding -------------------------------------------------------------------------------------


async def test_seeding_waits_for_the_process_seeding_the_same_workspace(
    links: tuple[RedisLink, RedisLink], tmp_path: Path
) -> None:
    a = Workspaces(tmp_path, "main", locks=RedisLocks(links[0]))
    b = Workspaces(tmp_path, "main", locks=RedisLocks(links[1]))
    # Process A holds alice's seed lock (as while it seeds); B must not seed meanwhile.
    original = a.ensure_user_files
    entered, leave = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_seed(user_id: str) -> list[str]:
        loop.call_soon_threadsafe(entered.set)
        asyncio.run_coroutine_threadsafe(leave.wait(), loop).result(10)
        return original(user_id)

    a.ensure_user_files = slow_seed  # type: ignore[method-assign]
    seeding_a = asyncio.create_task(a.prepare_user_files("alice"))
    await asyncio.wait_for(entered.wait(), 5)
    seeding_b = asyncio.create_task(b.prepare_user_files("alice"))
    await asyncio.sleep(0.3)  # kept (negative check)
    assert not seeding_b.done()
    assert not (a.user_dir("alice") / SEED_MARKER).exists()
    leave.set()
    assert await asyncio.wait_for(seeding_a, 5) == list(STANDARD_FILES)
    assert await asyncio.wait_for(seeding_b, 5) == []
    # Seen seeded: later runs in B ask Redis no more (and never wait on it).
    b.locks = None
    assert await b.prepare_user_files("alice") == []


# -- dedupe fast path ----------------------------------------------------------------------------


class Durable(MemorySeen):
    """The database's record, counting the writes the fast path saves."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.fail = False

    async def seen(self, key: str) -> bool:
        self.writes += 1
        if self.fail:
            raise ConnectionError("database down")
        return await super().seen(key)


async def test_a_repeat_reaching_another_process_is_caught_without_the_database(
    links: tuple[RedisLink, RedisLink],
) -> None:
    durable = Durable()
    a, b = FastDedupe(links[0], durable), FastDedupe(links[1], durable)
    assert await a.seen("telegram:update:1") is False
    assert await b.seen("telegram:update:1") is True
    assert await a.seen("telegram:update:1") is True
    assert durable.writes == 1  # the first sight only
    await b.forget("telegram:update:1")  # not accepted: its redelivery counts, everywhere
    assert await a.seen("telegram:update:1") is False


async def test_looking_a_key_up_records_nothing_and_a_done_key_needs_no_database(
    links: tuple[RedisLink, RedisLink],
) -> None:
    # Issue 27: the fast path must never claim an update the database does not hold. A look-up
    # (an adapter's, before the bot stored the update) leaves no key behind, in Redis or below.
    durable = Durable()
    a, b = FastDedupe(links[0], durable), FastDedupe(links[1], durable)
    assert await a.has_seen("telegram:update:7") is False
    assert durable.keys == set() and durable.writes == 0
    assert await links[0].client.keys(f"{links[0].key('seen')}*") == []
    assert await a.seen("telegram:update:7") is False  # recorded once the bot stored it
    durable.keys.clear()  # from here only Redis could know it
    assert await b.has_seen("telegram:update:7") is True


async def test_a_first_sight_the_database_refused_is_not_a_duplicate(
    links: tuple[RedisLink, RedisLink],
) -> None:
    durable = Durable()
    a, b = FastDedupe(links[0], durable), FastDedupe(links[1], durable)
    durable.fail = True
    with pytest.raises(ConnectionError):
        await a.seen("slack:event:E1")
    durable.fail = False
    assert await b.seen("slack:event:E1") is False


async def test_a_repeat_during_a_pending_first_sight_asks_the_database(
    links: tuple[RedisLink, RedisLink],
) -> None:
    gate = asyncio.Event()

    asked: list[str] = []

    class SlowDurable(Durable):
        async def seen(self, key: str) -> bool:
            asked.append(key)
            await gate.wait()
            return await super().seen(key)

    durable = SlowDurable()
    a, b = FastDedupe(links[0], durable), FastDedupe(links[1], durable)
    first = asyncio.create_task(a.seen("k"))
    await wait_until(lambda: asked)  # A's first sight is pending (in the database)
    second = asyncio.create_task(b.seen("k"))
    await asyncio.sleep(0.1)  # kept (negative check)
    assert not second.done()  # "pending" in Redis: B asks the database, not Redis alone
    gate.set()
    assert (await first, await second) == (False, True)
    assert durable.writes == 2


async def test_without_redis_the_database_answers(redis_prefix: str) -> None:
    durable = Durable()
    down = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=LEASE)  # never started
    try:
        dedupe = FastDedupe(down, durable)
        assert await dedupe.seen("k") is False
        assert await dedupe.seen("k") is True
        assert durable.writes == 2
    finally:
        await down.aclose()


# -- wiring --------------------------------------------------------------------------------------


@needs_postgres
async def test_a_clustered_loopgate_lends_its_locks_and_fast_path(
    cluster_config: ClusterConfig,
) -> None:
    async with Loopgate(cluster_config()) as app:
        assert app.cluster is not None
        loop = await app.gateway.router.resolve("main")
        assert loop.context.compactor.locks is app.cluster.locks
        assert loop.workspaces.locks is app.cluster.locks
        assert isinstance(app.gateway.dedupe, FastDedupe)
