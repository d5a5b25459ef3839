"""``/stop`` and ``/stopall`` across processes: two Loopgate instances on one Postgres schema
and one Redis; a run in B is stopped by a command A receives, with the usual permissions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from agent_core.run import RunStatus
from bot.app import Loopgate
from channels import ChatRef, ChatType
from tests.cluster_support import REDIS_URL, ClusterConfig, needs_postgres, needs_redis
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres]

DM = ChatRef("web", "dm-alice", ChatType.DIRECT)
ROOM = ChatRef("web", "room-1", ChatType.GROUP)


@pytest.fixture
async def pair(cluster_config: ClusterConfig) -> AsyncIterator[tuple[Loopgate, Loopgate]]:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Loopgate(cluster_config()))
        b = await stack.enter_async_context(Loopgate(cluster_config()))
        yield a, b


async def seen_by(app: Loopgate, chat: ChatRef, count: int) -> None:
    """Wait until ``app`` sees ``count`` runs of the chat's session (any process)."""
    key = f"agent:main:web:{chat.chat_type.value}:{chat.chat_id}"
    await wait_until(lambda: len(app.registry.runs_of(key)) >= count, 5)


async def cancelled_in(app: Loopgate, chat: ChatRef, within: float = 1.0) -> None:
    """Until every run of the chat's session held by ``app`` has been cancelled (its task
    told to stop): what a stop must achieve within 1 s. The run's own clean-up (trace, inbox,
    reactions) may take longer on a loaded machine, so the result is awaited separately."""
    key = f"agent:main:web:{chat.chat_type.value}:{chat.chat_id}"
    await wait_until(
        lambda: all(run.task.cancelling() for run in app.registry.runs_of(key)), within
    )


async def test_stop_in_a_cancels_the_run_in_b_within_a_second(
    pair: tuple[Loopgate, Loopgate], llm: FakeLLM
) -> None:
    a, b = pair
    assert a.cluster is not None and b.cluster is not None
    assert a.cluster.process_id != b.cluster.process_id
    llm.script(delay(10.0, text("too late")))
    in_b, in_a = ChatDriver(b, DM), ChatDriver(a, DM)
    done = await in_b.send("a slow question")
    assert done is not None
    await seen_by(a, DM, 1)
    assert a.registry.active_runs == 0 and b.registry.active_runs == 1
    started = time.monotonic()
    await in_a.send("/stop")
    await cancelled_in(b, DM)
    assert time.monotonic() - started < 1.0
    result = await asyncio.wait_for(done, 5.0)
    assert result is not None and result.status is RunStatus.CANCELLED
    assert in_a.texts() == ["Stopped."]
    assert in_b.texts() == []  # nothing of the cancelled answer went out
    await in_a.send("/stop")  # B's run is gone from A's view as well
    await in_a.wait_for(lambda: len(in_a.texts()) == 2)
    assert in_a.texts()[-1] == "Nothing to stop."


async def test_stopall_reaches_every_process(pair: tuple[Loopgate, Loopgate], llm: FakeLLM) -> None:
    a, b = pair
    llm.script(delay(10.0, text("late 1")), delay(10.0, text("late 2")))
    in_a, in_b = ChatDriver(a, ROOM), ChatDriver(b, ROOM)
    # One session is worked on by one process: both runs are B's, the /stopall goes to A.
    first = await in_b.send("first question", sender="alice")
    second = await in_b.send("second question", sender="alice")
    assert first is not None and second is not None
    await seen_by(a, ROOM, 2)
    await in_a.send("/stopall", sender="alice")
    await cancelled_in(b, ROOM)
    results = await asyncio.wait_for(asyncio.gather(first, second), 5.0)
    assert all(r is not None and r.status is RunStatus.CANCELLED for r in results)
    await in_a.wait_for(lambda: "Stopped." in in_a.texts())


async def test_permissions_hold_across_processes(
    pair: tuple[Loopgate, Loopgate], llm: FakeLLM
) -> None:
    a, b = pair
    llm.script(delay(10.0, text("bob's answer")))
    in_a, in_b = ChatDriver(a, ROOM), ChatDriver(b, ROOM)
    done = await in_b.send("bob asks", sender="bob")
    assert done is not None
    await seen_by(a, ROOM, 1)
    await in_a.send("/stop", sender="alice")  # not hers, and she is no admin
    await in_a.wait_for(lambda: bool(in_a.texts()))
    assert in_a.texts() == ["Only the person who asked or an admin can stop this."]
    await asyncio.sleep(0.3)  # kept (negative check): the run goes on
    assert not done.done()
    await in_a.send("/stop", sender="carol", admin=True)  # an admin may
    await cancelled_in(b, ROOM)
    result = await asyncio.wait_for(done, 5.0)
    assert result is not None and result.status is RunStatus.CANCELLED


async def test_a_process_starting_leaves_a_live_peers_work_alone(
    cluster_config: ClusterConfig, llm: FakeLLM
) -> None:
    llm.script(delay(1.5, text("the answer")))
    async with Loopgate(cluster_config()) as a:
        in_a = ChatDriver(a, DM)
        done = await in_a.send("a question")
        assert done is not None
        # B starts while A's entry is running: B's start-up replay must not take it over.
        async with Loopgate(cluster_config()) as b:
            in_b = ChatDriver(b, DM)
            await asyncio.wait_for(done, 5)
            await asyncio.sleep(0.5)  # kept (negative check): B answers nothing
            assert in_a.texts() == ["the answer"]
            assert in_b.texts() == []
            assert len(llm.chat_requests) == 1


async def test_stray_events_and_records_are_ignored(
    pair: tuple[Loopgate, Loopgate], llm: FakeLLM, redis_prefix: str
) -> None:
    a, b = pair
    client: Redis = Redis.from_url(REDIS_URL)
    with capture_logs() as logs:
        try:
            for junk in ("not json", '{"op": "add"}', "[1, 2]", '{"op": "abort"}'):
                await client.publish(f"{redis_prefix}:runs", junk)
            await client.hset(f"{redis_prefix}:runs:ghost", "r", "not json")
            await client.sadd(f"{redis_prefix}:runners", "ghost")
        finally:
            await client.aclose()
        # A refresh (every lease/3) reads the bad record too.
        await wait_until(
            lambda: (
                {"cluster.runs_bad_event", "cluster.runs_bad_record"}
                <= {entry["event"] for entry in logs}
            ),
            5,
        )
    events = {entry["event"] for entry in logs}
    assert {"cluster.runs_bad_event", "cluster.runs_bad_record"} <= events
    llm.script(delay(10.0, text("too late")))
    in_a, in_b = ChatDriver(a, DM), ChatDriver(b, DM)
    done = await in_b.send("a slow question")
    assert done is not None
    await seen_by(a, DM, 1)
    await in_a.send("/stop")
    await cancelled_in(b, DM)
    result = await asyncio.wait_for(done, 5.0)
    assert result is not None and result.status is RunStatus.CANCELLED
    assert a.cluster is not None and a.cluster.link.state.value == "ok"
