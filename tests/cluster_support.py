"""Fixtures for the cluster tests: a real Redis (LOOPGATE_TEST_REDIS_URL) with a fresh key
prefix per test, a Redis server of the test's own that it can stop and start, and a fresh
Postgres schema shared by the test's Loopgate instances."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

import bot.app
from bot.app import Loopgate
from bot.cluster.connection import RedisLink
from bot.cluster.work import ClusterWork
from bot.config import Config
from bot.storage import open_database
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM
from tests.storage_support import PG_URL, drop_schema

REDIS_URL = os.environ.get("LOOPGATE_TEST_REDIS_URL", "")

needs_redis = pytest.mark.skipif(
    not REDIS_URL, reason="set LOOPGATE_TEST_REDIS_URL=redis://127.0.0.1:6379/15 (.ci/run does)"
)
needs_postgres = pytest.mark.skipif(
    not PG_URL, reason="set LOOPGATE_TEST_POSTGRES_URL=postgresql+asyncpg://user:pw@host/db"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A redis-server of this test's own, so it can be stopped and started again."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
        )

    def listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys are deleted afterwards."""
    prefix = f"lgtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    client: Redis = Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


LINK_LEASE = 0.6
"""Seconds of the ``links`` fixture's leases: short, so tests that wait for one to expire are."""


@pytest.fixture
async def links(redis_prefix: str) -> AsyncIterator[tuple[RedisLink, RedisLink]]:
    """Two started Redis links on one key prefix: two processes' views of one cluster."""
    async with AsyncExitStack() as stack:
        pair = []
        for _ in range(2):
            link = RedisLink(REDIS_URL, key_prefix=redis_prefix, lease_seconds=LINK_LEASE)
            stack.push_async_callback(link.aclose)
            await link.start()
            pair.append(link)
        yield pair[0], pair[1]


@pytest.fixture
async def shared_schema(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """Every Loopgate of the test opens the same fresh Postgres schema, dropped afterwards."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    monkeypatch.setattr(bot.app, "open_database", functools.partial(open_database, schema=schema))
    yield schema
    async with await open_database(PG_URL, schema=schema) as db:
        await drop_schema(db, schema)


ClusterConfig = Callable[..., Config]


@pytest.fixture
def cluster_config(
    tmp_path: Path, llm: FakeLLM, redis_prefix: str, shared_schema: str
) -> ClusterConfig:
    """``cluster_config(**sections)``: Postgres + Redis, a 2-second lease (a ``cluster``
    section adds to it)."""

    def build(**sections: Any) -> Config:
        cluster = {"lease_seconds": 2, "key_prefix": redis_prefix, **sections.pop("cluster", {})}
        return make_config(
            tmp_path,
            llm,
            database={"url": PG_URL},
            redis={"url": REDIS_URL},
            cluster=cluster,
            **sections,
        )

    return build


def work_of(app: Loopgate) -> ClusterWork:
    """``app``'s work distribution (it runs with ``redis.url``)."""
    assert app.cluster is not None and app.cluster.work is not None
    return app.cluster.work


def is_poller(app: Loopgate, channel: str = "telegram") -> bool:
    """Whether ``app`` holds ``channel``'s poller lease now."""
    assert app.cluster is not None
    return app.cluster.pollers[channel].holds()
