"""``bot/cluster/service.py``: one process's coordination parts, against a real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.cluster.service import Cluster
from bot.config import Config
from tests.cluster_support import PG_URL, REDIS_URL, needs_postgres, needs_redis
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM
from tests.waiting import wait_until

pytestmark = [needs_redis, needs_postgres]  # a cluster's config needs a shared database

TOKEN = "123:bot-token"


def config_for(tmp_path: Path, llm: FakeLLM, prefix: str) -> Config:
    return make_config(
        tmp_path,
        llm,
        database={"url": PG_URL},  # not opened here: only the config asks for it
        redis={"url": REDIS_URL},
        cluster={"lease_seconds": 1, "key_prefix": prefix},
    )


@asynccontextmanager
async def process(config: Config) -> AsyncIterator[Cluster]:
    cluster = Cluster(config)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.aclose()


async def test_a_started_process_joins_and_reports_its_health(
    tmp_path: Path, llm: FakeLLM, redis_prefix: str
) -> None:
    async with process(config_for(tmp_path, llm, redis_prefix)) as cluster:
        health = cluster.health()
        assert health["redis"] == "ok" and not cluster.degraded
        assert health["process"] == cluster.process_id == cluster.link.process_id
        assert health["poller"] == {} and health["leases"] == {}  # nothing polls or claims


async def test_one_process_polls_a_bot_and_hands_over_when_it_releases(
    tmp_path: Path, llm: FakeLLM, redis_prefix: str
) -> None:
    config = config_for(tmp_path, llm, redis_prefix)
    async with process(config) as first, process(config) as second:
        a, b = first.poll_gate("telegram", TOKEN), second.poll_gate("telegram", TOKEN)
        await asyncio.wait_for(a.wait_turn(), 5)
        waiting = asyncio.create_task(b.wait_turn())
        await wait_until(lambda: b._task is not None)  # the second competes
        assert first.health()["poller"] == {"telegram": True}
        assert second.health()["poller"] == {"telegram": False}
        await first.release_pollers()  # a drain: the other polls at once
        await asyncio.wait_for(waiting, 5)
        assert second.health()["poller"] == {"telegram": True}
        assert first.health()["poller"] == {"telegram": False}


async def test_an_abandoned_lease_is_taken_over_only_once_it_runs_out(
    tmp_path: Path, llm: FakeLLM, redis_prefix: str
) -> None:
    config = config_for(tmp_path, llm, redis_prefix)
    async with process(config) as first, process(config) as second:
        a, b = first.poll_gate("zalo", TOKEN), second.poll_gate("zalo", TOKEN)
        await asyncio.wait_for(a.wait_turn(), 5)
        first.abandon()  # as a SIGKILL leaves it: nothing handed back
        assert not a.holds()
        await asyncio.wait_for(b.wait_turn(), 5)  # after the 1 s lease ran out in Redis
        assert b.holds()


async def test_separate_bots_have_separate_pollers(
    tmp_path: Path, llm: FakeLLM, redis_prefix: str
) -> None:
    config = config_for(tmp_path, llm, redis_prefix)
    async with process(config) as first, process(config) as second:
        a = first.poll_gate("telegram", TOKEN)
        b = second.poll_gate("telegram", "456:another-bot")
        await asyncio.wait_for(asyncio.gather(a.wait_turn(), b.wait_turn()), 5)
        assert a.holds() and b.holds()
