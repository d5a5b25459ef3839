"""Three ``loopgate serve`` OS processes as one service (issue 17, point 7), on one Postgres
schema and one Redis key prefix, against the fake Telegram Bot API and the fake LLM.

The harness is :mod:`tests.cluster_processes`. One cluster in webhook mode is shared by the
tests that kill nothing (fresh chats per test); the tests that SIGKILL a process or restart
Redis start their own. What a user sees is what the fake Telegram recorded, whichever process
sent it; the inbox table and the Redis run mirror say which process holds what.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.cluster_processes import (
    ClusterLLM,
    PrivateRedis,
    ServeCluster,
    ServeProcess,
    dm_session,
    texts,
    topic_session,
    until,
)
from tests.cluster_support import REDIS_URL, needs_postgres, needs_redis
from tests.fakes.llm_server import delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.storage_support import PG_URL
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres, pytest.mark.asyncio(loop_scope="module")]

LEASE = 2.0
# Group pacing of the shared cluster: a burst of 2, then 2 per second. Private chats are paced
# per chat (1/s after a burst of 3, the default) and overall (30/s), which test (a) stays within.
GROUP_PER_MINUTE = 120.0
GROUP_BURST = 2
RATE_LIMIT = {"per_group_per_minute": GROUP_PER_MINUTE, "per_group_burst": GROUP_BURST}


@dataclass
class Service:
    cluster: ServeCluster
    tg: FakeTelegram
    llm: ClusterLLM

    async def settled(self, sessions: set[str], timeout: float = 30) -> None:
        """Wait until no inbox entry of ``sessions`` is pending: whatever the processes would
        still send for them, they have sent."""

        async def done() -> bool:
            rows = await self.cluster.pending()
            return not [r for r in rows if r["session_key"] in sessions]

        await until(
            done,
            lambda: f"pending entries left\n{self.cluster.logs()}",
            timeout=timeout,
            interval=0.1,
        )


@asynccontextmanager
async def service(
    workdir: Path,
    *,
    mode: str = "webhook",
    redis_url: str = REDIS_URL,
    telegram: dict[str, Any] | None = None,
) -> AsyncIterator[Service]:
    """Fakes plus three processes on a fresh schema and key prefix; torn down afterwards."""
    async with ClusterLLM() as llm, FakeTelegram() as tg:
        cluster = ServeCluster(
            workdir,
            llm=llm,
            tg=tg,
            redis_url=redis_url,
            key_prefix=f"lgproc-{uuid.uuid4().hex[:10]}",
            schema=f"test_{uuid.uuid4().hex[:16]}",
            postgres_url=PG_URL,
            mode=mode,
            lease_seconds=LEASE,
            telegram=telegram or {},
        )
        try:
            await cluster.start()
            yield Service(cluster, tg, llm)
        finally:
            await cluster.aclose()


@pytest_asyncio.fixture(scope="class", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Service]:
    """Three processes in webhook mode for the tests that kill nothing (``TestOneCluster``),
    stopped before the tests that start their own."""
    workdir = tmp_path_factory.mktemp("cluster")
    async with service(workdir, telegram={"rate_limit": RATE_LIMIT}) as svc:
        yield svc


def round_robin(start: int = 0) -> Iterator[int]:
    """0, 1, 2, 0, 1, 2, ...: the process each next update goes to."""
    index = start
    while True:
        yield index % 3
        index += 1


def _got(tg: FakeTelegram, chats: list[int]) -> dict[int, list[str]]:
    return {c: texts(tg, c) for c in chats}


def _diff(got: dict[int, list[str]], want: dict[int, list[str]]) -> str:
    return "\n".join(f"chat {c}: got {got[c]}, want {want[c]}" for c in want if got[c] != want[c])


class TestOneCluster:
    """Tests that kill nothing share one cluster (fresh chats each)."""

    # -- (a) every message answered once, in order per chat --------------------------------------

    async def test_webhooks_round_robin_over_three_processes_each_answered_once_in_order(
        self, shared: Service
    ) -> None:
        cluster, tg = shared.cluster, shared.tg
        chats = [10_000 + n for n in range(20)]
        per_chat = 3
        # Message m of the i-th chat goes to process (m * 20 + i) % 3: never twice in a row to the
        # same process, so each chat's messages arrive at different processes one after the other.
        targets = round_robin()
        plan: dict[int, list[tuple[int, str]]] = {c: [] for c in chats}
        for m in range(per_chat):
            for c in chats:
                plan[c].append((next(targets), f"chat {c} message {m}"))

        for c in chats:  # the first answer is the slowest: a process answering the second
            shared.llm.when(plan[c][0][1], delay(0.6))  # one at once would overtake it
            shared.llm.when(plan[c][1][1], delay(0.3))

        async def conversation(chat: int) -> None:
            for index, message in plan[chat]:
                await cluster.send(index, tg.private_message(message, user_id=chat))

        await asyncio.gather(*(conversation(c) for c in chats))
        want = {c: [f"echo: {message}" for _, message in plan[c]] for c in chats}

        def answered() -> bool:
            return all(len(texts(tg, c)) >= per_chat for c in chats)

        await until(answered, lambda: f"{_got(tg, chats)}\n{cluster.logs()}", timeout=45)
        await shared.settled({dm_session(c) for c in chats})
        got = {c: texts(tg, c) for c in chats}
        assert got == want, _diff(got, want)
        # Each message was run once (no second run whose answer would differ only in timing).
        for c in chats:
            for _, message in plan[c]:
                assert shared.llm.asked(message) == 1, message
        assert all(p.alive for p in cluster), cluster.logs()

    # -- (b) /stop to one process stops the run another holds -----------------------------------

    async def test_stop_sent_to_one_process_stops_a_slow_run_held_by_another_within_a_second(
        self, shared: Service
    ) -> None:
        cluster, tg, llm = shared.cluster, shared.tg, shared.llm
        user = 20_001
        question = "a slow question for the stop test"
        llm.when(question, delay(30, text("too late: the stop did not reach the run")))
        await cluster.send(0, tg.private_message(question, user_id=user))
        await until(lambda: llm.asked(question) == 1, cluster.logs)
        holder = await cluster.holder_of(dm_session(user))
        other = next(p for p in cluster if p is not holder)
        rows = await cluster.inbox(dm_session(user))
        assert [r["state"] for r in rows] == ["running"], rows

        started = time.monotonic()
        await cluster.send(other.index, tg.private_message("/stop", user_id=user))

        async def stopped() -> bool:
            rows = await cluster.inbox(dm_session(user))
            return [(r["state"], r["reason"]) for r in rows] == [("dropped", "stopped")]

        await until(stopped, cluster.logs, timeout=5, interval=0.01)
        elapsed = time.monotonic() - started
        assert elapsed < 1.0, f"the run in process {holder.index} stopped after {elapsed:.2f}s"
        await tg.wait_for(lambda: texts(tg, user), timeout=5)
        assert texts(tg, user) == ["Stopped."]
        assert not await cluster.holders_of(dm_session(user))

    # -- (e) pacing holds across processes --------------------------------------------------------

    async def test_group_pacing_holds_across_processes(self, shared: Service) -> None:
        """Nine topics of one forum group, one message each, spread over the three processes: the
        group's sends stay within one bucket (burst 2, then 2/s), not three."""
        cluster, tg = shared.cluster, shared.tg
        group = -100_555
        topics = list(range(101, 110))
        root = {"message_id": 1, "date": 0, "chat": {"id": group, "type": "supergroup"}}

        def topic_message(topic: int) -> dict[str, Any]:
            return tg.group_message(
                f"question in topic {topic}",
                chat_id=group,
                user_id=30_000 + topic,
                forum=True,
                message_thread_id=topic,
                is_topic_message=True,
                reply_to_message={
                    **root,
                    "message_id": topic,
                    "forum_topic_created": {"name": f"topic {topic}", "icon_color": 1},
                },
            )

        targets = round_robin()
        await asyncio.gather(*(cluster.send(next(targets), topic_message(t)) for t in topics))

        def sends() -> list[float]:
            return [
                c.at
                for c in tg.calls_of("sendMessage")
                if "_message_id" in c.params and int(c.params["chat_id"]) == group
            ]

        await until(
            lambda: len(sends()) >= len(topics), lambda: f"{sends()}\n{cluster.logs()}", timeout=30
        )
        await shared.settled({topic_session(group, t) for t in topics})
        for t in topics:
            assert texts(tg, group, t) == [f"echo: question in topic {t}"], texts(tg, group)
        times = sorted(sends())
        assert len(times) == len(topics)
        rate = GROUP_PER_MINUTE / 60
        # One bucket: 2 at once, then one every 0.5 s (three buckets would be done in ~0.5 s).
        least = (len(topics) - GROUP_BURST) / rate
        assert times[-1] - times[0] >= least - 0.5, [round(t - times[0], 2) for t in times]
        # And at no moment more than the bucket allows (give or take the time between a
        # process's decision to send and the request reaching the fake).
        jitter = 0.5
        for i in range(len(times)):
            for j in range(i + 1, len(times)):
                allowed = GROUP_BURST + rate * (times[j] - times[i] + jitter)
                assert j - i + 1 <= allowed, (
                    f"{j - i + 1} sends to the group within {times[j] - times[i]:.2f}s "
                    f"(a shared bucket allows {allowed:.1f}); send times: "
                    f"{[round(t - times[0], 2) for t in times]}"
                )


# -- (c) SIGKILL of the elected poller ----------------------------------------------------------


async def pollers(cluster: ServeCluster) -> list[ServeProcess]:
    found = []
    for process in cluster.alive:
        if (await process.health()).get("poller", {}).get("telegram"):
            found.append(process)
    return found


async def test_sigkill_of_the_poller_polling_resumes_elsewhere_nothing_lost_or_doubled(
    tmp_path: Path,
) -> None:
    async with service(tmp_path, mode="polling") as svc:
        cluster, tg = svc.cluster, svc.tg
        elected: list[ServeProcess] = []

        async def one_poller() -> bool:
            nonlocal elected
            elected = await pollers(cluster)
            return len(elected) == 1

        await until(one_poller, lambda: f"pollers: {elected}\n{cluster.logs()}")
        leader = elected[0]
        users = [40_000 + n for n in range(8)]
        for user in users:
            tg.push(tg.private_message(f"before the kill {user}", user_id=user))
        await until(lambda: all(texts(tg, u) for u in users), cluster.logs)
        # Recorded as answered too: a kill between a send and its record would be a crash
        # mid-answer (the next test), not the poller takeover this one is about.
        await svc.settled({dm_session(u) for u in users})

        await leader.kill()
        killed_at = time.monotonic()
        for user in users:  # nobody polls now: these wait at "Telegram"
            tg.push(tg.private_message(f"after the kill {user}", user_id=user))
        await until(
            lambda: all(len(texts(tg, u)) >= 2 for u in users),
            lambda: f"{_got(tg, users)}\n{cluster.logs()}",
            timeout=LEASE + 15,
        )
        resumed_after = time.monotonic() - killed_at
        await svc.settled({dm_session(u) for u in users})
        for user in users:
            assert texts(tg, user) == [
                f"echo: before the kill {user}",
                f"echo: after the kill {user}",
            ]
        assert resumed_after < LEASE + 5, resumed_after
        now = await pollers(cluster)
        assert len(now) == 1 and now[0] is not leader, now
        assert len(cluster.alive) == 2


# -- (d) SIGKILL mid-answer ---------------------------------------------------------------------


def long_answer() -> list[str]:
    """Three paragraphs that Telegram gets as three messages (~3.4k of its 4k each)."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon"] * 95
    return [f"Part {n}: " + " ".join(f"{w}{n}" for w in words) for n in (1, 2, 3)]


async def test_sigkill_mid_answer_another_process_takes_over_without_a_double_chunk(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as svc:
        cluster, tg, llm = svc.cluster, svc.tg, svc.llm
        parts = long_answer()
        user = 50_001
        question = "tell me everything, in three parts"
        llm.when(question, text("\n\n".join(parts)))
        tg.hold("sendMessage", after=1)  # the second chunk never gets an answer
        await cluster.send(1, tg.private_message(question, user_id=user))
        await tg.wait_for(lambda: tg.held, timeout=15)
        assert texts(tg, user) == parts[:1]
        holder = await cluster.holder_of(dm_session(user))

        await holder.kill()
        killed_at = time.monotonic()
        tg.release()  # the dead process's request is answered 502 and never recorded
        await until(
            lambda: len(texts(tg, user)) >= 3,
            lambda: f"{[t[:7] for t in texts(tg, user)]}\n{cluster.logs()}",
            timeout=LEASE + 15,
        )
        taken_over_after = time.monotonic() - killed_at
        await svc.settled({dm_session(user)})
        sent = texts(tg, user)
        assert sent == parts, [t[:7] for t in sent]  # each chunk once, in order
        assert llm.asked(question) == 1  # the saved answer was sent, the model not asked again
        rows = await cluster.inbox(dm_session(user))
        assert [r["state"] for r in rows] == ["answered"], rows
        assert holder not in cluster.alive and len(cluster.alive) == 2
        # Taken over once the lease ran out (plus the sweep), not a dead process's 60 s.
        assert taken_over_after < LEASE + 8, taken_over_after


# -- (f) Redis restarted mid-run ------------------------------------------------------------------


async def test_redis_restarted_mid_run_nothing_lost(tmp_path: Path) -> None:
    if not PrivateRedis.available():
        pytest.fail("redis-server is not installed (.ci/run installs it)")
    redis = PrivateRedis(tmp_path)
    await redis.start()
    try:
        async with service(tmp_path / "cluster", redis_url=redis.url) as svc:
            cluster, tg, llm = svc.cluster, svc.tg, svc.llm
            users = [60_000 + n for n in range(6)]

            def to(phase: int, user: int) -> int:
                """Each phase sends a chat's message to the next process."""
                return (users.index(user) + phase) % 3

            # Phase 1: answers still being written (a slow model) when Redis goes away, and
            # still when the next message of the same chat arrives at another process.
            first = [(to(0, u), tg.private_message(f"first {u}", user_id=u)) for u in users]
            for user in users:
                llm.when(f"first {user}", delay(4.0))
            await asyncio.gather(*(cluster.send(index, update) for index, update in first))
            await until(lambda: all(llm.asked(f"first {u}") for u in users), cluster.logs)

            redis.stop()

            async def all_see(state: str) -> bool:
                seen = [(await p.health()).get("redis") for p in cluster.alive]
                return seen == [state] * len(seen)

            await until(lambda: all_see("down"), cluster.logs, timeout=10, interval=0.1)
            # Phase 2: messages arriving while Redis is down (Telegram retries a 503).
            second = [(to(1, u), tg.private_message(f"second {u}", user_id=u)) for u in users]
            await asyncio.gather(*(deliver(cluster, index, update) for index, update in second))
            await redis.start()
            await until(lambda: all_see("ok"), cluster.logs, timeout=15, interval=0.1)
            # Phase 3: after the restart.
            third = [(to(2, u), tg.private_message(f"third {u}", user_id=u)) for u in users]
            await asyncio.gather(*(cluster.send(index, update) for index, update in third))

            await until(
                lambda: all(len(texts(tg, u)) >= 3 for u in users),
                lambda: f"{_got(tg, users)}\n{cluster.logs()}",
                timeout=30,
            )
            await svc.settled({dm_session(u) for u in users})
            # Each message answered exactly once. Not asserted: their order. A Redis restarted
            # empty forgets the session leases while their holders still run, so a message
            # that arrives then may be answered by another process before the running one
            # (docs/scaling.md, "Work distribution, the rare cases").
            for user in users:
                assert sorted(texts(tg, user)) == [
                    f"echo: first {user}",
                    f"echo: second {user}",
                    f"echo: third {user}",
                ], texts(tg, user)
                for phase in ("first", "second", "third"):
                    assert llm.asked(f"{phase} {user}") == 1, (phase, user)
            rows = await cluster.inbox()
            assert {r["state"] for r in rows} == {"answered"}, rows
            assert all(p.alive for p in cluster), cluster.logs()
    finally:
        redis.stop()


async def deliver(
    cluster: ServeCluster, index: int, update: dict[str, Any], timeout: float = 20
) -> None:
    """Deliver a webhook update as Telegram does: a 503 (not taken) is retried until taken."""
    update_id = cluster.tg.new_update_id()

    async def taken() -> httpx.Response | None:
        response = await cluster.post(index, update, update_id)
        return None if response.status_code == 503 else response

    response = await wait_until(
        taken, timeout, interval=0.2, what=lambda: f"still 503 after {timeout}s\n{cluster.logs()}"
    )
    assert response.status_code == 200, (response.status_code, response.text)
