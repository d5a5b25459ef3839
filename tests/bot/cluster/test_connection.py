"""bot/cluster/connection.py: one process's Redis link on a real Redis: its id and keys, the
lease scripts (only the holder renews or releases), its health (down and up again when its own
Redis server stops and starts) and a subscription that outlives a Redis restart."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, suppress

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from structlog.testing import capture_logs

from agent_core import stop_if_cancelled
from bot.cluster.connection import (
    RELEASE_IF_HELD,
    RENEW_IF_HELD,
    RedisLink,
    RedisState,
    process_id,
)
from tests.cluster_support import REDIS_URL, PrivateRedis, free_port, needs_redis
from tests.waiting import wait_until


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def started(stack: AsyncExitStack, url: str, prefix: str = "p") -> RedisLink:
    link = RedisLink(url, key_prefix=prefix, lease_seconds=5)
    stack.push_async_callback(link.aclose)
    await link.start()
    return link


def test_process_ids_name_the_host_and_pid_and_differ() -> None:
    first, second = process_id(), process_id()
    host, pid, suffix = first.split(":")
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert len(suffix) == 6 and int(suffix, 16) >= 0
    assert first != second  # a reused pid in a fresh container still differs


def test_keys_live_under_the_prefix() -> None:
    link = RedisLink("redis://127.0.0.1:1/0", key_prefix="lg", lease_seconds=5)
    assert link.key("runs") == "lg:runs"
    assert link.key("runs", "host:1:abc") == "lg:runs:host:1:abc"
    assert link.state is RedisState.DOWN  # nothing is known before start


def test_mark_logs_only_changes() -> None:
    link = RedisLink("redis://127.0.0.1:1/0", key_prefix="lg", lease_seconds=5)
    with capture_logs() as logs:
        link.mark(True)
        link.mark(True)
        link.mark(False, ConnectionError("gone"))
        link.mark(False, ConnectionError("still gone"))
        link.mark(True)
    assert [e["event"] for e in logs] == [
        "cluster.redis_up",
        "cluster.redis_down",
        "cluster.redis_up",
    ]
    assert link.state is RedisState.OK


async def test_an_unreachable_redis_at_start_is_an_error(stack: AsyncExitStack) -> None:
    link = RedisLink(f"redis://127.0.0.1:{free_port()}/0", key_prefix="p", lease_seconds=5)
    stack.push_async_callback(link.aclose)
    with pytest.raises(RedisConnectionError):
        await link.start()
    assert link.state is RedisState.DOWN


@needs_redis
async def test_start_connects_and_aclose_stops_watching(redis_prefix: str) -> None:
    link = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=5)
    await link.start()
    assert link.state is RedisState.OK
    watch = link._watch
    assert watch is not None and not watch.done()
    await link.aclose()
    assert watch.cancelled() and link._watch is None


@needs_redis
async def test_only_the_holder_renews_or_releases_a_lease(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    link = await started(stack, REDIS_URL, redis_prefix)
    key = link.key("lease", "x")
    await link.client.set(key, "me", px=1000)
    assert await link.run_script(RENEW_IF_HELD, [key], "other", 60_000) == 0
    assert await link.client.pttl(key) <= 1000
    assert await link.run_script(RENEW_IF_HELD, [key], "me", 60_000) == 1
    assert await link.client.pttl(key) > 1000
    assert await link.run_script(RELEASE_IF_HELD, [key], "other") == 0
    assert await link.client.get(key) == b"me"
    assert await link.run_script(RELEASE_IF_HELD, [key], "me") == 1
    assert await link.client.get(key) is None
    assert await link.run_script(RENEW_IF_HELD, [key], "me", 60_000) == 0  # gone: not revived


@needs_redis
async def test_a_script_is_sent_once_and_again_after_redis_forgot_it(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    link = await started(stack, REDIS_URL, redis_prefix)
    free = link.key("lease", "free")

    async def calls(command: str) -> int:
        stats = await link.client.info("commandstats")
        return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))

    assert await link.run_script(RELEASE_IF_HELD, [free], "me") == 0  # loaded, if need be
    evals, evalshas = await calls("eval"), await calls("evalsha")
    for _ in range(3):
        assert await link.run_script(RELEASE_IF_HELD, [free], "me") == 0
    assert (await calls("eval"), await calls("evalsha")) == (evals, evalshas + 3)
    await link.client.script_flush()  # what a restarted Redis knows of it
    await link.client.set(free, "me")
    assert await link.run_script(RELEASE_IF_HELD, [free], "me") == 1
    assert await link.client.get(free) is None


@needs_redis
async def test_listen_delivers_the_channels_messages(
    stack: AsyncExitStack, redis_prefix: str
) -> None:
    link = await started(stack, REDIS_URL, redis_prefix)
    got: list[bytes | str] = []
    subscribed = asyncio.Event()

    async def on_subscribed() -> None:
        subscribed.set()

    channel = link.key("events")
    listener = asyncio.create_task(link.listen(channel, got.append, on_subscribed))
    try:
        await asyncio.wait_for(subscribed.wait(), 5)
        await link.client.publish(link.key("elsewhere"), "not for us")
        await link.client.publish(channel, "one")
        await link.client.publish(channel, "two")
        await wait_until(lambda: len(got) >= 2, 5, what=lambda: f"got {got}")
        assert got == [b"one", b"two"]
    finally:
        listener.cancel()
        with suppress(asyncio.CancelledError):
            await listener
    assert listener.cancelled()  # a cancel ends it, not swallowed by the retry loop


async def test_a_restarted_redis_is_noticed_and_subscribed_again(
    stack: AsyncExitStack, private_redis: PrivateRedis
) -> None:
    await wait_until(private_redis.listening, 5, interval=0.05)
    link = await started(stack, private_redis.url)
    got: list[bytes | str] = []
    subscriptions: list[float] = []

    async def on_subscribed() -> None:
        subscriptions.append(asyncio.get_running_loop().time())

    listener = asyncio.create_task(link.listen("events", got.append, on_subscribed))
    stack.callback(listener.cancel)
    await wait_until(lambda: subscriptions, 5)
    private_redis.stop()
    await wait_until(lambda: link.state is RedisState.DOWN, 10, what="never marked down")
    private_redis.start()
    await wait_until(lambda: len(subscriptions) >= 2, 15, what="never subscribed again")
    await wait_until(lambda: link.state is RedisState.OK, 10, what="never marked up")
    publisher: Redis = Redis.from_url(private_redis.url)
    stack.push_async_callback(publisher.aclose)
    await publisher.publish("events", "after the restart")
    await wait_until(lambda: got, 5)
    assert got == [b"after the restart"]


async def test_a_loop_stops_when_its_call_turns_the_cancellation_into_an_error() -> None:
    # Python 3.11's wait_for, or a client tearing its connection down mid-command, can answer
    # a cancellation with another error; the background loops that log errors and go on must
    # still end, or their owner's aclose waits forever (a CI teardown hung on this).
    calls = 0
    waiting = asyncio.Event()

    async def command() -> None:
        nonlocal calls
        calls += 1
        waiting.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise RedisConnectionError("connection torn down") from None

    give_up = False

    async def background_loop() -> None:
        while not give_up:
            try:
                await command()
            except Exception as exc:
                stop_if_cancelled(exc)

    task = asyncio.create_task(background_loop())
    await waiting.wait()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2.0)
    if not done:  # it swallowed the cancellation: end it, so the test fails instead of hanging
        give_up = True
        task.cancel()
        await asyncio.wait({task}, timeout=2.0)
    assert done and task.cancelled()
    assert calls == 1


async def test_an_error_without_a_cancellation_goes_on() -> None:
    try:
        raise RedisConnectionError("down")
    except RedisConnectionError as exc:
        stop_if_cancelled(exc)  # nothing asked this task to stop: the loop may go on
