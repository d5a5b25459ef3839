"""A polling cluster spreads its chats: the elected poller receives every update, and assigns
each session nobody holds to a member chosen by the session key (``bot/cluster/members.py``),
so the other processes answer their share instead of idling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.members import Members
from bot.pipeline.session_keys import session_key
from channels import ChatRef, ChatType
from tests.cluster_support import (
    ClusterConfig,
    is_poller,
    needs_postgres,
    needs_redis,
    work_of,
)
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import telegram_section
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres]

LEASE = 2.0  # cluster_config's


@pytest.fixture
async def pair(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> AsyncIterator[tuple[Loopgate, Loopgate]]:
    telegram = telegram_section(tg)  # polling
    async with AsyncExitStack() as stack:
        apps = [
            await stack.enter_async_context(
                Loopgate(cluster_config(channels={"telegram": telegram}))
            )
            for _ in range(2)
        ]
        yield apps[0], apps[1]


async def roles(a: Loopgate, b: Loopgate) -> tuple[Loopgate, Loopgate]:
    """The elected poller and the other, once the poller knows both are members."""
    await wait_until(lambda: is_poller(a) or is_poller(b), LEASE + 1)
    poller, other = (a, b) if is_poller(a) else (b, a)
    await wait_until(lambda: len(work_of(poller).members.live) == 2, LEASE + 1)
    return poller, other


async def chats_answered(tg: FakeTelegram, count: int) -> None:
    """One DM from each of ``count`` users, each answered."""
    for user in range(1, count + 1):
        tg.push(tg.private_message(f"u{user}", user_id=user))
    await tg.wait_for(lambda: len(tg.texts()) == count, timeout=10)


def dm_key(user_id: int) -> str:
    return session_key("main", ChatRef("telegram", str(user_id), ChatType.DIRECT))


async def test_the_poller_spreads_new_chats_over_the_processes(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    poller, other = await roles(*pair)
    users = range(1, 21)
    # Where each chat must go: the member its key hashes to (None: the poller itself).
    elsewhere = {u for u in users if work_of(poller).members.target(dm_key(u)) is not None}
    assert 0 < len(elsewhere) < len(users)  # 20 chats over two members: both get some

    for round_ in range(2):
        for user in users:
            tg.push(tg.private_message(f"u{user} m{round_}", user_id=user))
        await tg.wait_for(lambda n=round_: len(tg.texts()) == len(users) * (n + 1), timeout=20)
    await asyncio.sleep(0.5)  # kept (negative check): time for a double, if there were one
    for user in users:
        answers = [t for t in tg.texts() if t.startswith(f"echo: u{user} ")]
        assert answers == [f"echo: u{user} m0", f"echo: u{user} m1"]
    # The other process claimed the chats assigned to it, and only those (each chat's second
    # message went to the process holding it).
    assert work_of(other).claimed == 2 * len(elsewhere)
    assert work_of(other).members.live == work_of(poller).members.live


async def test_a_chat_assigned_to_a_dead_member_is_answered_after_a_lease(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """A member that died stays listed until its membership runs out: a session assigned to it
    meanwhile waits for its lease, then any process's sweep takes it."""
    poller, _ = await roles(*pair)
    members = work_of(poller).members
    ghost = "ghost:1:dead"
    until = int((time.time() + 60) * 1000)
    await members.link.client.zadd(members.key, {ghost: until})
    await members.refresh()
    assert ghost in members.live
    user = next(u for u in range(1, 200) if members.target(dm_key(u)) == ghost)

    started = time.monotonic()
    tg.push(tg.private_message("anyone there?", user_id=user))
    await tg.wait_for(lambda: tg.texts() == ["echo: anyone there?"], timeout=LEASE * 6)
    assert time.monotonic() - started >= LEASE * 0.9  # it did wait for the ghost's lease


async def test_members_agree_on_where_a_session_goes(links: tuple[RedisLink, RedisLink]) -> None:
    one, two = Members(links[0]), Members(links[1])
    await one.refresh()
    await two.refresh()
    await one.refresh()
    assert one.live == two.live == sorted(link.process_id for link in links)
    for user in range(50):  # the same member for both: the other process, or "itself" (None)
        by_one, by_two = one.target(dm_key(user)), two.target(dm_key(user))
        assert {by_one, by_two} in ({None, links[0].process_id}, {None, links[1].process_id})
        assert (by_one or links[0].process_id) == (by_two or links[1].process_id)

    alone = Members(links[0])
    alone.live = [alone.link.process_id]
    assert alone.target(dm_key(1)) is None
    alone.live = []
    assert alone.target(dm_key(1)) is None
    alone.live = sorted([alone.link.process_id, "other:1:x"])
    chosen = {alone.target(dm_key(u)) for u in range(50)}
    assert chosen == {None, "other:1:x"}  # itself (None) for some, the other for the rest


async def test_a_draining_process_is_assigned_no_new_chats(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    poller, other = await roles(*pair)
    assert other.cluster is not None and poller.cluster is not None
    await other.cluster.release_pollers()  # what a drain does first
    await work_of(other).members.refresh()  # its renewals no longer list it
    await work_of(poller).members.refresh()
    assert work_of(poller).members.live == [poller.cluster.process_id]

    await chats_answered(tg, 10)
    assert work_of(other).claimed == 0


async def test_members_hear_of_a_process_joining_or_leaving_at_once(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> None:
    """Not only at their next renewal: a poller that started first would otherwise take every
    new chat itself for up to a third of a lease after the others joined."""
    telegram = telegram_section(tg)
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(
            Loopgate(cluster_config(channels={"telegram": telegram}))
        )
        renewer = work_of(first)._renewer
        assert renewer is not None
        renewer.cancel()  # its own renewals would refresh the list too
        await asyncio.gather(renewer, return_exceptions=True)
        assert len(work_of(first).members.live) == 1

        with capture_logs() as logs:
            second = await stack.enter_async_context(
                Loopgate(cluster_config(channels={"telegram": telegram}))
            )
            await wait_until(lambda: len(work_of(first).members.live) == 2, LEASE)
        assert {"event": "cluster.members", "count": 2} in [
            {"event": e["event"], "count": e.get("count")} for e in logs
        ]  # an operator sees the change in the log
        assert second.cluster is not None
        await second.cluster.release_pollers()  # a drain
        await wait_until(lambda: len(work_of(first).members.live) == 1, LEASE)


async def test_spreading_can_be_turned_off(cluster_config: ClusterConfig, tg: FakeTelegram) -> None:
    """``cluster.spread_polled: false``: the poller answers every chat itself (a standby)."""
    telegram = telegram_section(tg)
    config = cluster_config(channels={"telegram": telegram}, cluster={"spread_polled": False})
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Loopgate(config))
        b = await stack.enter_async_context(Loopgate(config))
        _, other = await roles(a, b)
        await chats_answered(tg, 10)
        assert work_of(other).claimed == 0


async def test_a_polled_chat_stays_with_its_member_when_idle(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """Its next message comes through the poller, which sends it to the same member anyway:
    handing the session back would only cost a release and a take per message."""
    poller, other = await roles(*pair)
    await chats_answered(tg, 6)
    await wait_until(
        lambda: not poller.gateway.busy_sessions() and not other.gateway.busy_sessions()
    )
    for user in range(1, 7):
        holder = other if work_of(poller).members.target(dm_key(user)) else poller
        assert work_of(holder).leases.holds(dm_key(user))
