"""Session leases on a real Redis: two ``RedisLink``s are two processes. One process holds a
session at a time, renewing extends only busy sessions still ours, release hands them back at
once, and a Redis that can't be reached claims nothing new."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from bot.cluster.connection import RedisLink, RedisState
from bot.cluster.session_leases import SessionLeases
from tests.cluster_support import REDIS_URL, needs_redis
from tests.waiting import wait_until

pytestmark = [needs_redis]

LEASE = 30.0  # long: the tests shorten a lease in Redis themselves when they need it to age
SESSION = "agent:main:telegram:direct:42"


async def start_link(stack: AsyncExitStack, prefix: str, lease: float = LEASE) -> RedisLink:
    link = RedisLink(REDIS_URL, key_prefix=prefix, lease_seconds=lease)
    stack.push_async_callback(link.aclose)
    await link.start()
    return link


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


@pytest.fixture
async def pair(stack: AsyncExitStack, redis_prefix: str) -> tuple[SessionLeases, SessionLeases]:
    return (
        SessionLeases(await start_link(stack, redis_prefix)),
        SessionLeases(await start_link(stack, redis_prefix)),
    )


@pytest.fixture
async def raw(stack: AsyncExitStack) -> Redis:
    client: Redis = Redis.from_url(REDIS_URL)
    stack.push_async_callback(client.aclose)
    return client


def key_of(prefix: str, session_key: str) -> str:
    return f"{prefix}:session:{hashlib.sha256(session_key.encode()).hexdigest()[:32]}"


async def test_one_holder_at_a_time(pair: tuple[SessionLeases, SessionLeases]) -> None:
    a, b = pair
    assert await a.take(SESSION) is None
    assert a.holds(SESSION) and a.held == [SESSION]
    assert await b.take(SESSION) == a.link.process_id
    assert not b.holds(SESSION) and b.held == []
    assert await a.take(SESSION) is None  # taking it again is fine: it is ours
    assert await b.holder(SESSION) == a.link.process_id
    assert await b.take("agent:main:telegram:direct:43") is None  # another session is free


async def test_keys_are_hashed_under_the_prefix(
    pair: tuple[SessionLeases, SessionLeases], redis_prefix: str, raw: Redis
) -> None:
    a, _ = pair
    await a.take(SESSION)
    keys = [k.decode() async for k in raw.scan_iter(match=f"{redis_prefix}:*")]
    assert keys == [key_of(redis_prefix, SESSION)]
    assert "42" not in keys[0].removeprefix(redis_prefix)
    assert await raw.get(keys[0]) == a.link.process_id.encode()
    assert 0 < await raw.pttl(keys[0]) <= LEASE * 1000


async def test_nobody_holds_an_untaken_session(pair: tuple[SessionLeases, SessionLeases]) -> None:
    a, _ = pair
    assert await a.holder(SESSION) is None
    assert not a.holds(SESSION)


async def test_renew_extends_busy_sessions_only(
    pair: tuple[SessionLeases, SessionLeases], redis_prefix: str, raw: Redis
) -> None:
    a, _ = pair
    busy, idle = SESSION, "agent:main:web:direct:idle"
    await a.take(busy)
    await a.take(idle)
    for session in (busy, idle):
        await raw.pexpire(key_of(redis_prefix, session), 5_000)
    await a.renew([busy])
    assert await raw.pttl(key_of(redis_prefix, busy)) > 5_000
    assert await raw.pttl(key_of(redis_prefix, idle)) <= 5_000
    assert set(a.held) == {busy, idle}  # idle: kept while its lease lasts


async def test_renew_gives_up_a_session_another_process_took(
    pair: tuple[SessionLeases, SessionLeases], redis_prefix: str, raw: Redis
) -> None:
    a, b = pair
    await a.take(SESSION)
    await raw.delete(key_of(redis_prefix, SESSION))  # lost (a Redis restart), then taken
    assert await b.take(SESSION) is None
    with capture_logs() as logs:
        await a.renew([SESSION])
    assert not a.holds(SESSION) and a.held == []
    assert await a.holder(SESSION) == b.link.process_id
    assert any(e["event"] == "cluster.session_leases_lost" and e["lost"] == 1 for e in logs)


async def test_release_hands_back_only_our_sessions(
    pair: tuple[SessionLeases, SessionLeases], redis_prefix: str, raw: Redis
) -> None:
    a, b = pair
    ours, stolen = SESSION, "agent:main:web:direct:stolen"
    await a.take(ours)
    await a.take(stolen)
    await raw.delete(key_of(redis_prefix, stolen))
    assert await b.take(stolen) is None
    await a.release_all()
    assert a.held == [] and not a.holds(ours)
    assert await b.take(ours) is None  # at once, without waiting for the lease
    assert await a.holder(stolen) == b.link.process_id  # b's lease was not deleted


async def test_an_unrenewed_lease_runs_out(stack: AsyncExitStack, redis_prefix: str) -> None:
    a = SessionLeases(await start_link(stack, redis_prefix, lease=0.3))
    b = SessionLeases(await start_link(stack, redis_prefix, lease=0.3))
    assert await a.take(SESSION) is None
    await wait_until(lambda: not a.holds(SESSION), timeout=5)

    async def b_takes() -> bool:
        return await b.take(SESSION) is None  # None: the session is b's now

    await wait_until(b_takes, timeout=5, what="b never got the session")
    assert await a.take(SESSION) == b.link.process_id


async def test_unreachable_redis_claims_nothing(
    pair: tuple[SessionLeases, SessionLeases], raw: Redis
) -> None:
    a, _ = pair
    assert await a.take(SESSION) is None
    good = a.link.client
    a.link.client = Redis.from_url("redis://127.0.0.1:1/15", socket_connect_timeout=1)
    try:
        assert await a.take("agent:main:web:direct:new") == ""
        assert a.link.state is RedisState.DOWN
        assert await a.holder(SESSION) is None
        await a.renew([SESSION])  # fails: what we held stays ours until it would run out
        assert a.holds(SESSION)
        with capture_logs() as logs:
            await a.release_all()
        assert any(e["event"] == "cluster.session_release_failed" for e in logs)
    finally:
        await a.link.client.aclose()
        a.link.client = good


async def test_a_refused_take_nudges_the_holder_in_the_same_call(
    pair: tuple[SessionLeases, SessionLeases], redis_prefix: str, raw: Redis
) -> None:
    a, b = pair
    pubsub = raw.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(f"{redis_prefix}:work:{a.link.process_id}")
        nudge = (f"{redis_prefix}:work:", "claim it")
        assert await a.take(SESSION, nudge=nudge) is None  # free: taken, nobody nudged
        assert await a.take(SESSION, nudge=nudge) is None  # ours: nobody nudged either
        assert await b.take(SESSION, nudge=nudge) == a.link.process_id
        assert a.left(SESSION) > LEASE / 2 and b.left(SESSION) == 0.0
        received = []
        for _ in range(5):  # None for the (ignored) subscription reply, then when drained
            message = await pubsub.get_message(timeout=0.2)
            if message is not None:
                received.append(message["data"])
        assert received == [b"claim it"]
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]


async def test_a_session_handed_back_is_free_for_the_next_taker(
    pair: tuple[SessionLeases, SessionLeases],
) -> None:
    a, b = pair
    assert await a.take(SESSION) is None
    a.release_soon(SESSION)
    assert not a.holds(SESSION)  # no longer ours at once, before Redis hears of it

    async def b_takes_it() -> bool:
        return await b.take(SESSION) is None

    await wait_until(b_takes_it, timeout=2.0)


async def test_taken_again_before_its_release_went_out_it_stays_held(
    pair: tuple[SessionLeases, SessionLeases], raw: Redis, redis_prefix: str
) -> None:
    # The release is sent after this take: it must not delete the lease the take extends.
    a, _ = pair
    assert await a.take(SESSION) is None
    a.release_soon(SESSION)
    assert await a.take(SESSION) is None
    await wait_until(lambda: a._flush is None and not a._releasing)
    assert await raw.get(key_of(redis_prefix, SESSION)) == a.link.process_id.encode()
    assert a.holds(SESSION)
