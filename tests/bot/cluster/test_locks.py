"""Locks shared by processes (issue 17, point 5), on a real Redis: two ``RedisLink``s are two
processes. The compaction try-lock and the seed-once workspace lock each behave as one across
them; a clustered Loopgate lends them and the dedupe fast path (tested in test_dedupe.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core.bootstrap import SEED_MARKER, STANDARD_FILES, Workspaces
from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.dedupe import FastDedupe
from bot.cluster.locks import RedisLease, RedisLocks
from tests.agent_core.test_compaction import RoleProvider, pairs
from tests.agent_core.test_loop import make_loop, request
from tests.cluster_support import LINK_LEASE, REDIS_URL, ClusterConfig, needs_postgres, needs_redis

pytestmark = [needs_redis]

LEASE = LINK_LEASE


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
