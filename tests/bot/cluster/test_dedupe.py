"""The dedupe fast path (``bot/cluster/dedupe.py``) on a real Redis, two ``RedisLink``s being two
processes: a repeat anywhere is caught without a database write, a look-up records nothing, a
first sight the database refused or one still pending is the database's to answer, and
without Redis the database answers alone."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.cluster.connection import RedisLink
from bot.cluster.dedupe import DONE, PENDING, FastDedupe
from tests.cluster_support import LINK_LEASE, REDIS_URL, needs_redis
from tests.inbound_support import MemorySeen
from tests.waiting import wait_until

pytestmark = [needs_redis]

LEASE = LINK_LEASE


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


async def test_a_pending_first_sight_is_the_databases_to_look_up(
    links: tuple[RedisLink, RedisLink],
) -> None:
    durable = Durable()
    dedupe = FastDedupe(links[0], durable)
    fast_key = dedupe._key("k")
    await links[0].client.set(fast_key, PENDING)  # another process's first sight, in flight
    assert await dedupe.has_seen("k") is False  # the database does not hold it (yet)
    durable.keys.add("k")
    assert await dedupe.has_seen("k") is True
    assert durable.writes == 0  # a look-up writes nothing


async def test_a_first_sight_ends_done_with_the_ttl(links: tuple[RedisLink, RedisLink]) -> None:
    dedupe = FastDedupe(links[0], Durable(), ttl_seconds=30)
    assert await dedupe.seen("telegram:update:42") is False
    fast_key = dedupe._key("telegram:update:42")
    assert await links[0].client.get(fast_key) == DONE
    assert 0 < await links[0].client.pttl(fast_key) <= 30_000
    assert "update:42" not in fast_key  # hashed: a message id never shows in Redis


async def test_forget_without_redis_still_forgets_the_record_and_raises(
    redis_prefix: str,
) -> None:
    durable = Durable()
    durable.keys.add("k")
    dead = RedisLink("redis://127.0.0.1:1/0", key_prefix=redis_prefix, lease_seconds=LEASE)
    try:
        with pytest.raises(RedisConnectionError):
            await FastDedupe(dead, durable).forget("k")
        assert durable.keys == set()  # the database's record is gone whatever Redis said
    finally:
        await dead.aclose()


async def _commands(link: RedisLink) -> int:
    """Redis' count of the key commands the fast path sends (the links' pings left out)."""
    stats = await link.client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("get", "set"))


async def test_a_peeked_first_sight_is_recorded_in_two_round_trips(
    links: tuple[RedisLink, RedisLink],
) -> None:
    # The adapter's peek found no key, so the record needs no "pending" step: the database
    # answers it and the key becomes "done" after (a GET and a SET, not three commands).
    durable = Durable()
    a, b = FastDedupe(links[0], durable), FastDedupe(links[1], durable)
    before = await _commands(links[0])
    assert await a.has_seen("telegram:update:9") is False
    assert await a.seen("telegram:update:9") is False
    assert await _commands(links[0]) - before == 2
    assert await links[0].client.get(a._key("telegram:update:9")) == DONE
    assert await b.seen("telegram:update:9") is True  # a repeat elsewhere: Redis alone
    assert durable.writes == 1
    before = await _commands(links[0])
    assert await a.seen("telegram:update:10") is False  # no peek: the pending path
    assert await _commands(links[0]) - before == 2  # SET NX GET, SET XX
    assert await a.has_seen("telegram:update:10") is True


async def test_a_peeked_key_the_database_refuses_or_already_holds_stays_out_of_redis(
    links: tuple[RedisLink, RedisLink],
) -> None:
    durable = Durable()
    dedupe = FastDedupe(links[0], durable)
    assert await dedupe.has_seen("a") is False
    durable.fail = True
    with pytest.raises(ConnectionError):
        await dedupe.seen("a")
    durable.fail = False
    assert await links[0].client.get(dedupe._key("a")) is None
    assert await dedupe.seen("a") is False  # the redelivery is a first sight
    assert await dedupe.has_seen("b") is False
    durable.keys.add("b")  # recorded meanwhile by a first writer elsewhere (it may still forget)
    assert await dedupe.seen("b") is True
    assert await links[0].client.get(dedupe._key("b")) is None  # its writer's "done" to set


async def test_a_peek_that_found_a_pending_key_leaves_the_record_on_the_pending_path(
    links: tuple[RedisLink, RedisLink],
) -> None:
    durable = Durable()
    dedupe = FastDedupe(links[0], durable)
    fast_key = dedupe._key("k")
    await links[0].client.set(fast_key, PENDING)  # another process's first sight, in flight
    assert await dedupe.has_seen("k") is False
    durable.keys.add("k")  # that first sight landed
    assert await dedupe.seen("k") is True
    assert await links[0].client.get(fast_key) == PENDING  # not this caller's to change
