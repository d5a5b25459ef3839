"""One poller per bot: two Loopgate instances with Telegram polling on one fake Bot API; only
the elected one calls ``getUpdates``, and when it stops renewing its lease (a killed process)
the other takes over within ``cluster.lease_seconds``, losing and doubling nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from telegram import Bot

from bot.app import Loopgate
from bot.http.health import health_report
from channels.zalo import ZaloBotClient
from tests.cluster_support import ClusterConfig, is_poller, needs_postgres, needs_redis
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.zalo_server import DEFAULT_TOKEN, FakeZalo, text_event
from tests.telegram_support import channel_of, telegram_section
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres]

LEASE = 2.0


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Bot, float]]:
    """Every ``getUpdates`` call: which instance's bot made it, and when."""
    calls: list[tuple[Bot, float]] = []
    original = Bot.get_updates

    async def counted(self: Bot, *args: Any, **kwargs: Any) -> Any:
        calls.append((self, time.monotonic()))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Bot, "get_updates", counted)
    return calls


@pytest.fixture
async def pair(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> AsyncIterator[tuple[Loopgate, Loopgate]]:
    telegram = telegram_section(tg)
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(
            Loopgate(cluster_config(channels={"telegram": telegram}))
        )
        b = await stack.enter_async_context(
            Loopgate(cluster_config(channels={"telegram": telegram}))
        )
        yield a, b


async def test_one_poller_and_takeover_without_loss_or_double(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram, polls: list[tuple[Bot, float]]
) -> None:
    a, b = pair
    await wait_until(lambda: is_poller(a) or is_poller(b), LEASE + 1)
    leader, follower = (a, b) if is_poller(a) else (b, a)
    assert not is_poller(follower)
    first = tg.push(tg.private_message("one"))
    await tg.wait_for(lambda: tg.texts() == ["echo: one"])
    await asyncio.sleep(1.5)  # kept (negative check): a few long polls more, none by B
    assert polls and {id(bot) for bot, _ in polls} == {id(channel_of(leader).bot)}

    leader_health, _ = await health_report(leader)
    follower_health, _ = await health_report(follower)
    assert leader_health["poller"] == {"telegram": True}
    assert follower_health["poller"] == {"telegram": False}

    # The leader stops renewing without handing the lock back, like a killed process; an
    # update arrives meanwhile (the old leader may fetch it in its last poll, and drops it).
    assert leader.cluster is not None
    leader.cluster.abandon()
    abandoned = time.monotonic()
    second = tg.push(tg.private_message("two"))
    await wait_until(lambda: is_poller(follower), LEASE + 1)
    took_over = time.monotonic() - abandoned
    assert took_over <= LEASE + 0.3, took_over
    await tg.wait_for(lambda: len(tg.texts()) >= 2)
    await asyncio.sleep(1.5)  # kept (negative check): time for a double, if there were one
    assert tg.texts() == ["echo: one", "echo: two"]
    follower_bot = channel_of(follower).bot
    assert all(at >= abandoned for bot, at in polls if bot is follower_bot)
    # The follower confirmed past both updates: Telegram will not hand them out again.
    assert [u["update_id"] for u in tg.updates if u["update_id"] in (first, second)] == []


async def test_zalo_is_polled_by_one_process_too(
    cluster_config: ClusterConfig, zalo: FakeZalo, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[ZaloBotClient, float]] = []
    original = ZaloBotClient.get_updates

    async def counted(self: ZaloBotClient, wait: int = 30) -> Any:
        calls.append((self, time.monotonic()))
        return await original(self, wait)

    monkeypatch.setattr(ZaloBotClient, "get_updates", counted)
    section = {
        "enabled": True,
        "token": DEFAULT_TOKEN,
        "api_base_url": zalo.base_url,
        "mode": "polling",
        "polling_timeout": 1,
        "backoff_initial": 0.02,
        "backoff_max": 0.5,
    }
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Loopgate(cluster_config(channels={"zalo": section})))
        b = await stack.enter_async_context(Loopgate(cluster_config(channels={"zalo": section})))
        assert a.cluster is not None and b.cluster is not None
        leases = {a: a.cluster.pollers["zalo"], b: b.cluster.pollers["zalo"]}
        await wait_until(lambda: any(lease.holds() for lease in leases.values()), LEASE + 1)
        leader, follower = (a, b) if leases[a].holds() else (b, a)
        zalo.push(text_event("one"))
        await wait_until(lambda: zalo.texts() == ["echo: one"], 10)
        await asyncio.sleep(1.0)  # kept (negative check): more polls, none by the follower
        clients = {id(client) for client, _ in calls}
        assert clients == {id(leader.gateway.channels["zalo"].client)}  # type: ignore[attr-defined]
        assert leader.cluster is not None
        leader.cluster.abandon()
        abandoned = time.monotonic()
        await wait_until(lambda: leases[follower].holds(), LEASE + 1)
        assert time.monotonic() - abandoned <= LEASE + 0.3
        zalo.push(text_event("two"))
        await wait_until(lambda: len(zalo.texts()) >= 2, 10)
        await asyncio.sleep(1.0)  # kept (negative check): time for a double
        assert zalo.texts() == ["echo: one", "echo: two"]
        follower_client = follower.gateway.channels["zalo"].client  # type: ignore[attr-defined]
        assert any(client is follower_client and at > abandoned for client, at in calls)
