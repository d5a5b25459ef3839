"""bot/cluster/runs.py: the cluster's run registry on a real Redis. Two registries on two
``RedisLink``s are two processes: each sees the other's runs (read from Redis every third of a
lease and whenever a stop asks), stops them through Redis, drops them when they end, when their
process says it is gone, or when its record expires; bad events and records are skipped.
``/stop`` through whole services is tested in test_stop.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from bot.cluster.connection import RedisLink
from bot.cluster.runs import ClusterRunRegistry, RemoteHandle
from bot.pipeline.run_registry import ActiveRun
from tests.cluster_support import REDIS_URL, needs_redis
from tests.waiting import wait_until

pytestmark = [needs_redis]

LEASE = 1.5  # a resync every 0.5 s
SESSION = "agent:main:web:group:room"


class Handle:
    """A run's task as the registry sees it: records the cancels it gets."""

    def __init__(self) -> None:
        self.cancels = 0

    def cancel(self, msg: Any | None = None) -> bool:
        self.cancels += 1
        return True

    def cancelling(self) -> int:
        return self.cancels


def run(run_id: str, session: str = SESSION, *, parent: str | None = None) -> ActiveRun:
    return ActiveRun(run_id, "main", session, f"user-{run_id}", Handle(), parent_run_id=parent)


def cancels(active: ActiveRun) -> int:
    assert isinstance(active.task, Handle)
    return active.task.cancels


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def process(stack: AsyncExitStack, prefix: str, lease: float = LEASE) -> ClusterRunRegistry:
    link = RedisLink(REDIS_URL, key_prefix=prefix, lease_seconds=lease)
    stack.push_async_callback(link.aclose)
    await link.start()
    registry = ClusterRunRegistry(link)
    stack.push_async_callback(registry.aclose)
    await registry.start()
    return registry


@pytest.fixture
async def pair(
    stack: AsyncExitStack, redis_prefix: str
) -> tuple[ClusterRunRegistry, ClusterRunRegistry]:
    return await process(stack, redis_prefix), await process(stack, redis_prefix)


def ids(runs: list[ActiveRun]) -> list[str]:
    return [r.run_id for r in runs]


def refreshed(registry: ClusterRunRegistry, check: Callable[[], object]) -> Callable[[], Any]:
    """``check`` after ``registry`` read the others' runs, as a stop makes it do."""

    async def predicate() -> object:
        await registry.refresh()
        return check()

    return predicate


async def test_a_run_is_seen_by_the_other_process_until_it_ends(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry],
) -> None:
    a, b = pair
    a.register(run("r1"))
    await wait_until(lambda: b.runs_of(SESSION), 5, what="b never saw a's run")
    [seen] = b.runs_of(SESSION)
    assert (seen.run_id, seen.agent_id, seen.requester_id) == ("r1", "main", "user-r1")
    assert isinstance(seen.task, RemoteHandle)
    assert b.runs_of("another session") == []
    # The counters and the dashboard are this process's own.
    assert (a.active_runs, b.active_runs) == (1, 0)
    assert b.all_runs() == [] and ids(a.all_runs()) == ["r1"]
    a.unregister("r1")
    await wait_until(lambda: not b.runs_of(SESSION), 5, what="b kept an ended run")
    assert a.runs_of(SESSION) == []


async def test_runs_of_lists_every_process_oldest_first_without_running_childrens(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry],
) -> None:
    a, b = pair
    a.register(run("first"))
    await wait_until(lambda: b.runs_of(SESSION), 5)
    b.register(run("second"))
    a.register(run("child", parent="first"))  # stopped with its parent, not listed apart
    await wait_until(lambda: len(a.runs_of(SESSION)) == 2 and len(b.runs_of(SESSION)) == 2, 5)
    assert ids(a.runs_of(SESSION)) == ids(b.runs_of(SESSION)) == ["first", "second"]
    a.unregister("first")
    await wait_until(lambda: "child" in ids(b.runs_of(SESSION)), 5, what="orphan not listed")


async def test_stopping_a_run_of_another_process_cancels_it_there(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry],
) -> None:
    a, b = pair
    target, other = run("r1"), run("r2", "agent:main:web:direct:bob")
    a.register(target)
    a.register(other)
    await wait_until(lambda: b.runs_of(SESSION), 5)
    assert b.abort("r1", "agent:main:web:direct:bob") is False  # not this session's run
    assert b.abort("nope", SESSION) is False
    [remote] = b.runs_of(SESSION)
    assert remote.task.cancel() is True  # what /stop calls on the run it picked
    await wait_until(lambda: cancels(target) == 1, 5, what="the owner never cancelled it")
    assert cancels(other) == 0


async def test_a_local_run_is_stopped_without_redis(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry],
) -> None:
    a, _ = pair
    mine = run("r1")
    a.register(mine)
    assert a.abort("r1", SESSION) is True
    assert cancels(mine) == 1
    assert a.abort("r1", "wrong session") is False and cancels(mine) == 1


async def test_stopall_reaches_the_sessions_runs_everywhere(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry],
) -> None:
    a, b = pair
    theirs, mine, elsewhere = run("r1"), run("r2"), run("r3", "agent:main:web:direct:bob")
    a.register(theirs)
    a.register(elsewhere)
    b.register(mine)
    await wait_until(lambda: len(b.runs_of(SESSION)) == 2, 5)
    assert b.abort_session(SESSION) == 2
    assert cancels(mine) == 1
    await wait_until(lambda: cancels(theirs) == 1, 5, what="a's run was not stopped")
    assert cancels(elsewhere) == 0
    assert a.abort_session("a session nobody runs") == 0


async def test_a_process_that_leaves_takes_its_runs_along(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    # A long lease: no resync comes to the rescue during the test.
    a = await process(stack, redis_prefix, lease=60)
    b = await process(stack, redis_prefix, lease=60)
    a.register(run("r1"))
    await wait_until(refreshed(b, lambda: b.runs_of(SESSION)), 5)
    await a.aclose()
    # "gone" drops them at once: no waiting for the record to expire or the next resync.
    await wait_until(lambda: not b.runs_of(SESSION), 5, what="kept a gone process's run")


async def test_a_process_starting_later_sees_the_runs_already_there(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    a = await process(stack, redis_prefix)
    client: Redis = Redis.from_url(REDIS_URL)
    stack.push_async_callback(client.aclose)
    a.register(run("r1"))
    await wait_until(lambda: client.hexists(a.hash_key, "r1"), 5, what="never written")
    late = await process(stack, redis_prefix)
    assert ids(late.runs_of(SESSION)) == ["r1"]  # known from the start, before any event


async def test_records_of_a_dead_process_expire_and_bad_ones_are_skipped(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry], redis_prefix: str
) -> None:
    a, b = pair
    record = {
        "run_id": "ghost-run",
        "agent_id": "main",
        "session_key": SESSION,
        "requester_id": "u",
        "parent_run_id": None,
        "owner": "dead-host:1:abcdef",
        "started": 1.0,
    }
    client: Redis = Redis.from_url(REDIS_URL)
    try:
        with capture_logs() as logs:
            # A process that died without a word: its hash, never refreshed again.
            key = f"{redis_prefix}:runs:dead-host:1:abcdef"
            await client.hset(key, mapping={"ghost-run": json.dumps(record), "junk": "{"})
            await client.pexpire(key, int(LEASE * 1000))
            await client.sadd(f"{redis_prefix}:runners", "dead-host:1:abcdef")
            await client.publish(f"{redis_prefix}:runs", "not json")
            await client.publish(f"{redis_prefix}:runs", json.dumps({"op": "add"}))
            await wait_until(lambda: a.runs_of(SESSION) and b.runs_of(SESSION), 5)
            events = {e["event"] for e in logs}
        assert {"cluster.runs_bad_record", "cluster.runs_bad_event"} <= events
        assert ids(b.runs_of(SESSION)) == ["ghost-run"]
        await wait_until(lambda: not b.runs_of(SESSION), LEASE * 4, what="never expired")
        # Its hash gone, the dead process leaves the directory the resyncs read.
        directory = f"{redis_prefix}:runners"

        async def delisted() -> bool:
            return not await client.sismember(directory, "dead-host:1:abcdef")

        await wait_until(delisted, LEASE * 4, what="a dead process stayed listed")
    finally:
        await client.aclose()


async def test_a_run_that_ends_before_it_was_sent_costs_nothing(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry], redis_prefix: str
) -> None:
    a, b = pair
    client: Redis = Redis.from_url(REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(f"{redis_prefix}:runs")
        # Registered and unregistered before a's writer ran: nobody could have seen it.
        a.register(run("brief"))
        a.unregister("brief")
        a.register(run("seen"))
        await wait_until(refreshed(b, lambda: b.runs_of(SESSION)), 5, what="b never saw it")
        assert ids(b.runs_of(SESSION)) == ["seen"]
        assert await client.hkeys(a.hash_key) == [b"seen"]
        a.unregister("seen")
        await wait_until(refreshed(b, lambda: not b.runs_of(SESSION)), 5, what="kept it")
        events = []
        for _ in range(5):  # None for the (ignored) subscription reply, then when drained
            message = await pubsub.get_message(timeout=0.2)
            if message is not None:
                events.append(json.loads(message["data"]))
        assert events == []  # starts and ends are read from the records, never published
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
        await client.aclose()


async def test_one_batch_writes_the_runs_started_and_deletes_those_ended(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    a = await process(stack, redis_prefix, lease=60)
    client: Redis = Redis.from_url(REDIS_URL)
    stack.push_async_callback(client.aclose)
    a.register(run("r1"))
    a.register(run("r2"))
    await wait_until(lambda: client.hexists(a.hash_key, "r2"), 5, what="never written")
    records = {k.decode(): json.loads(v) for k, v in (await client.hgetall(a.hash_key)).items()}
    assert sorted(records) == ["r1", "r2"]
    assert records["r1"]["requester_id"] == "user-r1"
    assert records["r1"]["owner"] == a.link.process_id
    assert 0 < await client.pttl(a.hash_key) <= 60_000  # it expires if the process dies
    assert await client.sismember(a.directory, a.link.process_id)
    # One end and one start queued together: one call deletes the first and writes the other.
    a.unregister("r1")
    a.register(run("r3"))
    await wait_until(lambda: client.hexists(a.hash_key, "r3"), 5, what="r3 never written")
    assert sorted(await client.hkeys(a.hash_key)) == [b"r2", b"r3"]
    a.unregister("r2")
    a.unregister("r3")

    async def gone() -> bool:
        return not await client.exists(a.hash_key)

    await wait_until(gone, 5, what="the ended runs' records stayed")


async def test_a_stop_reads_runs_started_a_moment_ago_without_waiting_for_a_resync(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    # A long lease: the timer's resync never comes during the test; refresh (what a stop
    # calls first) is all that brings a's runs into b's view, and their ends out of it.
    a = await process(stack, redis_prefix, lease=60)
    b = await process(stack, redis_prefix, lease=60)
    client: Redis = Redis.from_url(REDIS_URL)
    stack.push_async_callback(client.aclose)
    a.register(run("r1"))
    await wait_until(lambda: client.hexists(a.hash_key, "r1"), 5, what="never written")
    assert b.runs_of(SESSION) == []  # no event made b's view current
    await b.refresh()
    assert ids(b.runs_of(SESSION)) == ["r1"]
    a.unregister("r1")

    async def ended() -> bool:
        return not await client.hexists(a.hash_key, "r1")

    await wait_until(ended, 5, what="never deleted")
    await b.refresh()
    assert b.runs_of(SESSION) == []


async def test_a_resync_reads_the_listed_processes_records_only(
    pair: tuple[ClusterRunRegistry, ClusterRunRegistry], redis_prefix: str
) -> None:
    a, b = pair
    a.register(run("r1"))
    await wait_until(lambda: b.runs_of(SESSION), 5)
    client: Redis = Redis.from_url(REDIS_URL)
    try:
        # a wrote its record and listed itself; b rebuilds its view from the list alone.
        assert await client.smembers(f"{redis_prefix}:runners") >= {a.link.process_id.encode()}
        b._remote.clear()
        await b._resync()
        assert ids(b.runs_of(SESSION)) == ["r1"]
        # A process that left takes itself off the list with its record.
        await a.aclose()
        listed = await client.smembers(f"{redis_prefix}:runners")
        assert a.link.process_id.encode() not in listed
    finally:
        await client.aclose()


async def test_the_refresh_loop_ends_when_a_call_swallowed_its_cancellation(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    # Python 3.11's wait_for returns a result that arrives with the cancellation and drops the
    # cancellation: the loop must still end (a CI teardown hung on cluster:runs-refresh).
    registry = await process(stack, redis_prefix, lease=0.3)  # a resync every 0.1 s
    calls = 0
    waiting = asyncio.Event()
    swallow = True

    async def resync() -> None:
        nonlocal calls
        calls += 1
        waiting.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if not swallow:
                raise

    registry._resync = resync  # type: ignore[method-assign]
    await waiting.wait()
    [task] = [t for t in registry._tasks if t.get_name() == "cluster:runs-refresh"]
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2.0)
    if not done:  # so that the teardown's aclose ends and the test fails instead of hanging
        swallow = False
        task.cancel()
    assert done and task.cancelled()
    assert calls == 1
