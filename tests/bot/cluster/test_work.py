"""Work distribution between two Loopgate instances on one Postgres schema and one Redis:
Telegram webhooks reach either instance; each chat is answered by one of them, in order,
exactly once (``bot/cluster/work.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update as sa_update

from bot.app import Loopgate
from bot.cluster.work import SETTLE_SECONDS
from bot.pipeline.session_keys import session_key
from bot.storage.inbox import InboxState
from bot.storage.models import InboxRow, utcnow
from channels import ChatRef, ChatType, InboundMessage, Sender
from channels.telegram._channel import SECRET_HEADER
from tests.cluster_support import ClusterConfig, needs_postgres, needs_redis, work_of
from tests.fakes.llm_server import FakeLLM, delay, echo
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import webhook_client
from tests.telegram_support import channel_of, telegram_section
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres]

SECRET = "cluster-work-secret"


def webhook_channels(tg: FakeTelegram) -> dict[str, Any]:
    telegram = telegram_section(
        tg,
        mode="webhook",
        webhook_url="https://bot.example/telegram/webhook",
        webhook_secret=SECRET,
    )
    return {"telegram": telegram}


async def start_pair(
    stack: AsyncExitStack, cluster_config: ClusterConfig, tg: FakeTelegram, **cluster: Any
) -> tuple[Loopgate, Loopgate]:
    apps = []
    for _ in range(2):
        config = cluster_config(channels=webhook_channels(tg), cluster=cluster)
        apps.append(await stack.enter_async_context(Loopgate(config)))
    return apps[0], apps[1]


@pytest.fixture
async def pair(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> AsyncIterator[tuple[Loopgate, Loopgate]]:
    async with AsyncExitStack() as stack:
        yield await start_pair(stack, cluster_config, tg)


class Webhooks:
    """POSTs updates to one instance's Telegram webhook, as Telegram would."""

    def __init__(self, app: Loopgate) -> None:
        channel = channel_of(app)
        self.http: httpx.AsyncClient = webhook_client(channel.webhook_path, channel.handle_webhook)
        self.path = channel.webhook_path

    async def post(self, update: dict[str, Any]) -> None:
        response = await self.http.post(self.path, json=update, headers={SECRET_HEADER: SECRET})
        assert response.status_code == 200, response.text


def update(tg: FakeTelegram, text: str, user_id: int) -> dict[str, Any]:
    message = tg.private_message(text, user_id=user_id)
    return {"update_id": tg.new_update_id(), **message}


async def test_one_chat_is_answered_by_one_process_in_order(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram, llm: FakeLLM
) -> None:
    a, b = pair
    count = 6
    # Slow answers: later messages arrive, at both instances, while earlier ones still run.
    llm.script(*(delay(0.15, echo()) for _ in range(count)))
    hooks = [Webhooks(a), Webhooks(b)]
    for i in range(count):
        await hooks[i % 2].post(update(tg, f"m{i}", user_id=42))
    await tg.wait_for(lambda: len(tg.texts()) >= count, timeout=20)
    await asyncio.sleep(0.5)  # kept (negative check): time for a double, if there were one
    assert tg.texts() == [f"echo: m{i}" for i in range(count)]
    # Every run of the chat was in the process that took its session first: claimed there
    # (received by the other, or before the session was held) or kept (received there while
    # it held the session).
    done = sorted((work_of(x).claimed + work_of(x).kept_count, work_of(x).claimed) for x in (a, b))
    assert done[0] == (0, 0) and done[1][0] == count
    assert done[1][1] >= count // 2  # the other process's messages all went through claims
    for hook in hooks:
        await hook.http.aclose()


async def test_chats_spread_over_the_processes_that_received_them(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    a, b = pair
    hook_a, hook_b = Webhooks(a), Webhooks(b)
    await hook_a.post(update(tg, "to a", user_id=1))
    await hook_b.post(update(tg, "to b", user_id=2))
    await tg.wait_for(lambda: len(tg.texts()) >= 2)
    assert sorted(tg.texts()) == ["echo: to a", "echo: to b"]
    # Nobody held them: each receiver took its chat before storing, and kept the message.
    assert work_of(a).kept_count == 1 and work_of(b).kept_count == 1
    assert work_of(a).claimed == 0 and work_of(b).claimed == 0
    health = a.cluster.health() if a.cluster is not None else {}
    assert health["leases"]["kept"] == 1
    await hook_a.http.aclose()
    await hook_b.http.aclose()


async def test_a_message_for_a_held_session_waits_for_its_holder(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram, llm: FakeLLM
) -> None:
    """B holds the chat (a slow answer runs there); A receives the next message: it is not
    answered by A, and B answers it after the first, nudged at once (well before a sweep)."""
    a, b = pair
    llm.script(delay(1.0, echo()), echo())
    hook_a, hook_b = Webhooks(a), Webhooks(b)
    await hook_b.post(update(tg, "first", user_id=7))
    await llm.wait_for(lambda: llm.chat_requests)  # B holds the chat: its run is under way
    await hook_a.post(update(tg, "second", user_id=7))
    await tg.wait_for(lambda: len(tg.texts()) >= 2, timeout=3.0)
    assert tg.texts() == ["echo: first", "echo: second"]
    # The first kept where it arrived (nobody held the chat), the second claimed there.
    assert work_of(a).claimed == 0 and work_of(b).claimed == 1 and work_of(b).kept_count == 1
    await hook_a.http.aclose()
    await hook_b.http.aclose()


async def test_a_message_kept_by_the_holder_does_not_overtake_one_a_peer_stored_before_it(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram, llm: FakeLLM
) -> None:
    """A holds the chat (its first answer runs); B stores the next message unowned, but its
    nudge is late (B's take with the nudge is held back). A then receives a third message
    for the session it holds: stored behind the one waiting in the inbox, it is claimed
    after it, so the chat is answered in order without waiting for the nudge."""
    a, b = pair
    llm.script(delay(0.5, echo()), echo(), echo())
    hook_a, hook_b = Webhooks(a), Webhooks(b)
    await hook_a.post(update(tg, "first", user_id=21))
    await llm.wait_for(lambda: llm.chat_requests)  # A holds the chat: its run is under way
    leases_b = work_of(b).leases
    gate = asyncio.Event()
    original_take = leases_b.take

    async def late_nudge(session_key: str, **kwargs: Any) -> str | None:
        if kwargs.get("nudge"):
            await gate.wait()
        return await original_take(session_key, **kwargs)

    leases_b.take = late_nudge  # type: ignore[method-assign]
    await hook_b.post(update(tg, "second", user_id=21))
    await hook_a.post(update(tg, "third", user_id=21))
    await tg.wait_for(lambda: len(tg.texts()) >= 3, timeout=5)
    assert tg.texts() == ["echo: first", "echo: second", "echo: third"]
    # "third" was stored behind "second" and claimed with it: not counted as kept.
    assert (work_of(a).claimed, work_of(a).kept_count) == (2, 1)
    gate.set()
    await asyncio.sleep(0.3)  # kept (negative check): B's late nudge claims nothing twice
    assert len(tg.texts()) == 3
    await hook_a.http.aclose()
    await hook_b.http.aclose()


async def test_a_message_a_peer_received_starts_in_the_claim_of_its_idle_holder(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """B holds the chat, idle after its first answer; A receives the next message and nudges
    B, whose claim marks the entry running itself: the turn writes no start of its own, and
    the entry is answered after one attempt. (B keeps the idle chat here, as when the nudge
    arrives before its hand-back went out, or a poller assigned B the chat.)"""
    a, b = pair
    work_of(b).leases.release_soon = lambda session_key: None  # type: ignore[method-assign]
    hook_a, hook_b = Webhooks(a), Webhooks(b)
    await hook_b.post(update(tg, "first", user_id=13))
    await tg.wait_for(lambda: len(tg.texts()) >= 1)
    # Idle: the first turn is over, not only its answer sent (on a loaded machine the nudge
    # could otherwise find the turn still finishing, and B claim without starting).
    await wait_until(lambda: not b.gateway.busy_sessions(), timeout=10)
    inbox_b = b.inbox
    assert inbox_b is not None
    starts: list[int] = []
    claimed: list[int | None] = []
    original_start, original_claim = inbox_b.start, inbox_b.claim_and_start

    async def counted_start(entry_id: int) -> bool:
        starts.append(entry_id)
        return await original_start(entry_id)

    async def recorded_claim(session_key: str) -> Any:
        entries, started = await original_claim(session_key)
        claimed.append(started)
        return entries, started

    inbox_b.start = counted_start  # type: ignore[method-assign]
    inbox_b.claim_and_start = recorded_claim  # type: ignore[method-assign]
    await hook_a.post(update(tg, "second", user_id=13))
    await tg.wait_for(lambda: len(tg.texts()) >= 2)
    assert tg.texts() == ["echo: first", "echo: second"]
    [started] = claimed
    assert started is not None and starts == []

    async def answered() -> bool:
        found = await inbox_b.get(started)
        return found is not None and found.state == InboxState.ANSWERED

    # The entry is marked answered once the send has returned, a moment after the fake shows
    # the text (on a loaded machine, after this test looked).
    await wait_until(answered, what="the entry marked answered")
    entry = await inbox_b.get(started)
    assert entry is not None and entry.message.text == "second"
    assert entry.attempts == 1
    await hook_a.http.aclose()
    await hook_b.http.aclose()


async def test_a_message_for_a_session_held_here_is_stored_as_ours_without_a_claim(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """A receives every message of a chat: each is stored as A's own and runs at once, as in
    one process (its session held, or taken again once A handed it back idle): no claim, no
    round trip through the inbox."""
    a, _ = pair
    hook_a = Webhooks(a)
    for text in ("first", "second", "third"):
        await hook_a.post(update(tg, text, user_id=11))
        await tg.wait_for(lambda text=text: f"echo: {text}" in tg.texts())
    assert tg.texts() == ["echo: first", "echo: second", "echo: third"]
    assert (work_of(a).claimed, work_of(a).kept_count) == (0, 3)
    await hook_a.http.aclose()


async def test_a_claim_under_way_keeps_a_newer_message_behind_it(
    pair: tuple[Loopgate, Loopgate],
) -> None:
    """While a claim of a held session is queued or running here (a peer's nudge), a message
    received for it takes the claim's path, so the peer's earlier message runs first."""
    a, _ = pair
    work = work_of(a)
    session = "agent:main:telegram:direct:77"
    assert await work.leases.take(session) is None
    assert work.holds(session)
    gate = asyncio.Event()
    original = work.inbox._claim

    async def slow_claim(session_key: str, *, start_first: bool) -> Any:
        await gate.wait()
        return await original(session_key, start_first=start_first)

    work.inbox._claim = slow_claim  # type: ignore[method-assign]
    work.claim_soon(session)  # registered at once, before its task runs
    assert not work.holds(session)
    gate.set()
    await wait_until(lambda: work.holds(session), timeout=5)


async def test_stopall_in_a_drops_what_waits_in_the_holder(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram, llm: FakeLLM
) -> None:
    """B runs the chat's first message and queues the next two (one turn: bot.queue_mode
    collect); /stopall sent to A cancels the run in B and drops B's queue: none of the three
    is ever answered."""
    a, b = pair
    llm.script(delay(5.0, echo()), echo(), echo())
    hook_a, hook_b = Webhooks(a), Webhooks(b)
    for text in ("one", "two", "three"):
        await hook_b.post(update(tg, text, user_id=9))
    gateway_b = b.gateway

    await wait_until(
        lambda: len(gateway_b.scheduler.queued(next(iter(gateway_b.busy_sessions()), ""))) >= 1, 5
    )
    await hook_a.post(update(tg, "/stopall", user_id=9))
    await tg.wait_for(lambda: "Stopped." in tg.texts(), timeout=5)
    # Kept (negative check): time for a dropped message to be answered, if it were.
    await asyncio.sleep(1.0)
    assert tg.texts() == ["Stopped."]
    assert not gateway_b.busy_sessions()
    inbox = b.inbox
    assert inbox is not None
    dropped = [e for e in await inbox.unanswered() if e.message.text in ("one", "two", "three")]
    assert sorted(e.reason or "" for e in dropped) == ["stopped"] + ["stopped by /stopall"] * 2
    await hook_a.http.aclose()
    await hook_b.http.aclose()


async def test_a_sweep_leaves_a_just_stored_entry_to_its_receiver(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """An entry stored unowned a moment ago is its receiver's to claim (or its holder's, once
    nudged): a peer's sweep leaves it, and takes it only once it has waited SETTLE_SECONDS (a
    lost nudge, a receiver that died before its claim)."""
    a, b = pair
    chat = ChatRef("telegram", "77", ChatType.DIRECT)
    msg = InboundMessage(chat=chat, message_id="1", sender=Sender(id="77", name="Ann"), text="hi")
    key = session_key("main", chat)
    inbox = work_of(a).inbox
    entry_id = await inbox.accept(
        msg, dedupe_key=msg.dedupe_key, session_key=key, agent_id="main", owned=False
    )
    assert entry_id is not None  # stored, as a receiver would, with no claim or nudge after it

    assert await work_of(b).sweep() == 0
    assert await work_of(b).leases.holder(key) is None  # not even taken

    stored = utcnow() - timedelta(seconds=SETTLE_SECONDS + 1)
    await a.db.run_write(
        lambda conn: conn.execute(
            sa_update(InboxRow).where(InboxRow.id == entry_id).values(created_at=stored)
        )
    )
    assert await work_of(b).sweep() == 1
    await tg.wait_for(lambda: tg.texts() == ["echo: hi"])


def chat_key(user_id: int) -> str:
    return session_key("main", ChatRef("telegram", str(user_id), ChatType.DIRECT))


async def test_an_idle_chat_is_answered_where_its_next_message_arrives(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> None:
    """A answers a chat and, idle, hands its session back; B receives the chat's next message:
    B takes the session and answers it itself, with no claim and no nudge to A. (A long
    lease: the session must be free because A handed it back, not because it ran out.)"""
    async with AsyncExitStack() as stack:
        a, b = await start_pair(stack, cluster_config, tg, lease_seconds=30)
        hook_a, hook_b = Webhooks(a), Webhooks(b)
        await hook_a.post(update(tg, "first", user_id=5))
        await tg.wait_for(lambda: tg.texts() == ["echo: first"])

        async def handed_back() -> bool:
            return await work_of(b).leases.holder(chat_key(5)) is None

        await wait_until(handed_back, what="A hands the idle session back")
        await hook_b.post(update(tg, "second", user_id=5))
        await tg.wait_for(lambda: tg.texts() == ["echo: first", "echo: second"])
        assert (work_of(a).kept_count, work_of(b).kept_count) == (1, 1)
        assert work_of(a).claimed == 0 and work_of(b).claimed == 0
        assert await work_of(a).leases.holder(chat_key(5)) in (None, work_of(b).link.process_id)
        await hook_a.http.aclose()
        await hook_b.http.aclose()


async def test_a_session_is_not_handed_back_under_a_message_being_stored(
    pair: tuple[Loopgate, Loopgate], tg: FakeTelegram
) -> None:
    """A message kept here is stored after its session is taken: the session's last run
    ending meanwhile must not hand it back (a peer would store the next message behind it
    and leave it to a sweep)."""
    a, _ = pair
    work = work_of(a)
    chat = ChatRef("telegram", "6", ChatType.DIRECT)
    msg = InboundMessage(chat=chat, message_id="1", sender=Sender(id="6", name="Ann"), text="x")
    job = a.gateway._job(msg, "main", chat_key(6))
    assert await work.hold(job)  # taken: nobody held it
    work.went_idle(chat_key(6))  # as if an earlier run of it had just ended
    assert work.leases.holds(chat_key(6))
    work.kept(job)  # stored
    work.went_idle(chat_key(6))
    assert not work.leases.holds(chat_key(6))


async def test_a_process_alone_keeps_its_idle_sessions(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> None:
    """With no other member to take it, handing a session back would only cost its next
    message a take."""
    async with Loopgate(cluster_config(channels=webhook_channels(tg))) as app:
        hook = Webhooks(app)
        for n in range(2):
            await hook.post(update(tg, f"m{n}", user_id=8))
            await tg.wait_for(lambda n=n: len(tg.texts()) == n + 1)
            await wait_until(lambda: not app.gateway.busy_sessions())  # its run has ended
            assert work_of(app).leases.holds(chat_key(8))
        assert work_of(app).kept_count == 2  # the second held already: no take, no claim
        await hook.http.aclose()
