"""Shared send pacing (issue 17, point 5): two processes sending for one bot are paced as one.

The budgets are generous (20 sends a second) so the tests stay fast; what they check is the
spacing of the sends the fake platforms recorded, or of the grants the pacers gave, which two
independent pacers would not respect (each would allow its own burst and its own rate)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack

import pytest

from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.pacing import RedisPaceStore
from channels import ChatRef, ChatType
from channels.protocol import PaceBucket
from channels.slack import SlackChannel
from channels.telegram import RateLimits, SendPacer
from tests.cluster_support import REDIS_URL, ClusterConfig, needs_postgres, needs_redis
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.slack_support import slack_section
from tests.telegram_support import channel_of, telegram_section
from tests.waiting import wait_until

RATE = 20.0  # sends a second: one every 50 ms
STEP = 1 / RATE
SLACK = 0.02  # a send may be recorded this much early (HTTP and scheduling jitter)


def assert_paced_as_one(times: Sequence[float], *, burst: int, rate: float = RATE) -> None:
    """The i-th send (0-based) came no earlier than one bucket of ``rate``/``burst`` allows."""
    times = sorted(times)
    for i, at in enumerate(times):
        earliest = times[0] + max(0, i - burst + 1) / rate
        assert at >= earliest - SLACK, (i, [round(t - times[0], 3) for t in times])


@pytest.fixture
async def links(redis_prefix: str) -> AsyncIterator[tuple[RedisLink, RedisLink]]:
    """Two processes' connections to one Redis."""
    async with AsyncExitStack() as stack:
        pair = []
        for _ in range(2):
            link = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=2)
            stack.push_async_callback(link.aclose)
            await link.start()
            pair.append(link)
        yield pair[0], pair[1]


def pacers(links: tuple[RedisLink, RedisLink], limits: RateLimits) -> list[SendPacer]:
    return [SendPacer(limits, shared=RedisPaceStore(link, "telegram", "123:abc")) for link in links]


async def granted(pacer: SendPacer, chat_id: str, *, group: bool = False) -> float:
    await pacer.acquire(chat_id, group=group)
    return time.monotonic()


@needs_redis
async def test_chat_group_and_bot_buckets_are_shared(links: tuple[RedisLink, RedisLink]) -> None:
    wide = 1000.0
    per_chat = RateLimits(RATE, 2, wide * 60, 100, wide, 100)
    a, b = pacers(links, per_chat)
    times = await asyncio.gather(*(granted(p, "42") for p in (a, b) for _ in range(5)))
    assert_paced_as_one(times, burst=2)
    assert max(times) - min(times) >= 8 * STEP - SLACK  # two own buckets: 3 steps

    per_group = RateLimits(wide, 100, RATE * 60, 1, wide, 100)
    a, b = pacers(links, per_group)
    times = await asyncio.gather(*(granted(p, "-7", group=True) for p in (a, b) for _ in range(3)))
    assert_paced_as_one(times, burst=1)

    per_bot = RateLimits(wide, 100, wide * 60, 100, RATE, 2)
    a, b = pacers(links, per_bot)
    chats = [f"chat-{i}" for i in range(4)]  # different chats: only the bot's bucket binds
    times = await asyncio.gather(*(granted(p, chat) for p in (a, b) for chat in chats))
    assert_paced_as_one(times, burst=2)


@needs_redis
async def test_a_429_in_one_process_holds_the_chat_in_the_other(
    links: tuple[RedisLink, RedisLink],
) -> None:
    a, b = pacers(links, RateLimits())
    a.hold("42", 0.3)
    # The hold reaches Redis in the background: wait until its key is there.
    base = RedisPaceStore(links[0], "telegram", "123:abc").base
    await wait_until(lambda: links[0].client.keys(f"{base}:hold:*"), timeout=5)
    waited = await b.acquire("42", group=False)
    assert 0.2 <= waited <= 1.0
    assert await b.acquire("43", group=False) == 0  # other chats are not held


@needs_redis
async def test_keys_hold_a_digest_of_the_token_never_the_token(
    links: tuple[RedisLink, RedisLink], redis_prefix: str
) -> None:
    (a, _) = pacers(links, RateLimits())
    await a.acquire("42", group=True)
    keys = [k.decode() async for k in links[0].client.scan_iter(match=f"{redis_prefix}:pace:*")]
    assert len(keys) == 3 and all("123:abc" not in key for key in keys)


class HangingStore:
    """A store that never answers (Redis gone without closing the connection)."""

    def __init__(self) -> None:
        self.calls = 0

    async def take(self, buckets: Sequence[PaceBucket], *, hold: str = "") -> float:
        self.calls += 1
        await asyncio.sleep(3600)  # kept: a store that never answers
        return 0.0

    async def hold(self, name: str, seconds: float) -> None:
        await asyncio.sleep(3600)  # kept: a store that never answers


async def test_a_store_that_does_not_answer_falls_back_to_local_pacing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = HangingStore()
    pacer = SendPacer(RateLimits(RATE, 2, 1200, 100, 1000, 100), shared=store)
    assert pacer.shared is not None
    pacer.shared.timeout = 0.1
    started = time.monotonic()
    times = [await granted(pacer, "42") for _ in range(4)]
    # One wait for the store, then local pacing (burst 2, 20/s) without asking it again.
    assert store.calls == 1 and pacer.shared.down
    assert times[-1] - started < 0.1 + 3 * STEP + 0.2
    assert_paced_as_one(times, burst=2)
    assert times[3] - times[0] >= 2 * STEP - SLACK  # paced, not let through


@needs_redis
async def test_redis_known_down_is_not_waited_for(redis_prefix: str) -> None:
    link = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=2)  # never started: down
    try:
        pacer = SendPacer(RateLimits(), shared=RedisPaceStore(link, "telegram", "t"))
        started = time.monotonic()
        assert await pacer.acquire("42", group=False) == 0
        assert time.monotonic() - started < 0.05
        assert pacer.shared is not None and pacer.shared.down
    finally:
        await link.aclose()


# -- through two Loopgate instances ------------------------------------------------------------


@needs_redis
@needs_postgres
async def test_two_processes_send_to_one_telegram_chat_as_one(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> None:
    telegram = telegram_section(
        tg, rate_limit={"per_chat": RATE, "per_chat_burst": 2, "overall": 1000}
    )
    async with AsyncExitStack() as stack:
        apps = [
            await stack.enter_async_context(
                Loopgate(cluster_config(channels={"telegram": telegram}))
            )
            for _ in range(2)
        ]
        chat = ChatRef("telegram", "4242", ChatType.DIRECT)
        await asyncio.gather(
            *(channel_of(app).send_text(chat, f"{i}") for app in apps for i in range(5))
        )
    sends = [c.at for c in tg.calls_of("sendMessage") if str(c.params["chat_id"]) == "4242"]
    assert len(sends) == 10
    assert_paced_as_one(sends, burst=2)


@needs_redis
@needs_postgres
async def test_two_processes_post_to_one_slack_channel_as_one(
    cluster_config: ClusterConfig, slack: FakeSlack
) -> None:
    section = slack_section(slack, "http", rate_limit={"per_second": RATE, "burst": 2})
    async with AsyncExitStack() as stack:
        apps = [
            await stack.enter_async_context(Loopgate(cluster_config(channels={"slack": section})))
            for _ in range(2)
        ]
        channels = [app.gateway.channels["slack"] for app in apps]
        assert all(isinstance(c, SlackChannel) and c.pacer and c.pacer.shared for c in channels)
        chat = ChatRef("slack", "C42", ChatType.GROUP)
        await asyncio.gather(*(c.send_text(chat, f"{i}") for c in channels for i in range(5)))
    posts = [c.at for c in slack.calls_of("chat.postMessage") if c.args.get("channel") == "C42"]
    assert len(posts) == 10
    assert_paced_as_one(posts, burst=2)
