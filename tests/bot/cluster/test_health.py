"""``/healthz`` of a clustered process: ``redis: ok|down``, the process id, the poller per
polling channel; Redis down makes the service ``degraded`` (still 200), and it recovers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agent_core.run import RunStatus
from bot.app import Loopgate
from bot.http.health import health_report
from bot.http.server import create_app
from channels import ChatRef, ChatType
from tests.cluster_support import ClusterConfig, PrivateRedis, needs_postgres, needs_redis
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.waiting import wait_until


async def test_single_process_health_is_unchanged(tmp_path: Path, llm: FakeLLM) -> None:
    async with Loopgate(make_config(tmp_path, llm)) as app:
        body, status = await health_report(app)
    assert app.cluster is None
    assert status == 200 and body["status"] == "ok"
    assert not {"redis", "process", "poller"} & set(body)


@pytest.fixture
async def clustered(
    cluster_config: ClusterConfig, private_redis: PrivateRedis
) -> AsyncIterator[Loopgate]:
    config = cluster_config()
    config.redis.url = private_redis.url

    # The server needs a moment to listen (as before, start anyway once the wait is over).
    with contextlib.suppress(TimeoutError):
        await wait_until(private_redis.listening, 2.5, interval=0.05)
    async with Loopgate(config) as app:
        yield app


async def wait_health(app: Loopgate, redis: str) -> dict[str, object]:

    async def reported() -> dict[str, object] | None:
        body, status = await health_report(app)
        assert status == 200
        return body if body["redis"] == redis else None

    return await wait_until(reported, 15, interval=0.1, what=f"redis never became {redis}")


@needs_redis
@needs_postgres
async def test_redis_down_degrades_and_recovers(
    clustered: Loopgate, private_redis: PrivateRedis
) -> None:
    assert clustered.cluster is not None
    body = await wait_health(clustered, "ok")
    assert body["status"] == "ok"
    assert body["process"] == clustered.cluster.process_id
    assert str(body["process"]).count(":") == 2  # host:pid:random
    assert body["poller"] == {}  # no polling channel configured
    transport = httpx.ASGITransport(app=create_app(clustered, manage_lifespan=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://loopgate") as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["redis"] == "ok"
    assert response.json()["process"] == clustered.cluster.process_id
    private_redis.stop()
    body = await wait_health(clustered, "down")
    assert body["status"] == "degraded"
    assert body["database"] == "ok"
    private_redis.start()
    body = await wait_health(clustered, "ok")
    assert body["status"] == "ok"


@needs_redis
@needs_postgres
async def test_stops_work_again_after_a_redis_restart(
    clustered: Loopgate, private_redis: PrivateRedis, llm: FakeLLM
) -> None:
    await wait_health(clustered, "ok")
    private_redis.stop()
    await wait_health(clustered, "down")
    private_redis.start()
    await wait_health(clustered, "ok")
    llm.script(delay(10.0, text("too late")))
    async with Loopgate(clustered.config) as other:
        chat = ChatRef("web", "dm-alice", ChatType.DIRECT)
        here, there = ChatDriver(clustered, chat), ChatDriver(other, chat)
        # The run is in the process that lived through the restart: its subscription must be
        # back for the stop to reach it.
        done = await here.send("slow")
        assert done is not None
        key = "agent:main:web:direct:dm-alice"
        await wait_until(lambda: other.registry.runs_of(key), 5)
        await there.send("/stop")
        result = await asyncio.wait_for(done, 1.0)
        assert result is not None and result.status is RunStatus.CANCELLED
