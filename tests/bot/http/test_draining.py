"""SIGTERM as a PaaS sends it (``bot/http/draining.py``): the first signal starts Loopgate's drain
while the server keeps serving, the server exits once the drain is over (or failed), and a second
signal exits at once. Signals are delivered by calling ``handle_exit`` as uvicorn's handler does;
uvicorn's own signal capture is left out so the test runner keeps its signals."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator
from typing import cast

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http import draining
from bot.http.draining import DrainingServer
from tests.waiting import wait_until


class FakeLoopgate:
    """Loopgate's drain, held open until the test lets it end (or fail)."""

    def __init__(self) -> None:
        self.drains = 0
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def drain(self) -> None:
        self.drains += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error


class Server(DrainingServer):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("still here")


@contextlib.asynccontextmanager
async def serving(loopgate: FakeLoopgate) -> AsyncIterator[tuple[Server, asyncio.Task[None], str]]:
    config = uvicorn.Config(
        Starlette(routes=[Route("/", hello)]),
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_config=None,
        log_level="warning",
    )
    server = Server(config, cast(Loopgate, loopgate))
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: server.started or task.done())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield server, task, f"http://127.0.0.1:{port}/"
    finally:
        loopgate.release.set()
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def test_the_first_signal_drains_while_serving_then_exits() -> None:
    loopgate = FakeLoopgate()
    async with serving(loopgate) as (server, task, url):
        server.handle_exit(signal.SIGTERM, None)
        await wait_until(lambda: loopgate.drains == 1)
        assert not server.should_exit
        async with httpx.AsyncClient() as http:
            assert (await http.get(url)).text == "still here"  # answering during the drain
        assert server._captured_signals == [signal.SIGTERM]  # re-raised by uvicorn at the end
        loopgate.release.set()
        await asyncio.wait_for(task, 10)  # the drain over, the server shut down
        assert server.should_exit and loopgate.drains == 1


async def test_a_second_signal_skips_the_rest_of_the_drain() -> None:
    loopgate = FakeLoopgate()
    async with serving(loopgate) as (server, task, _url):
        server.handle_exit(signal.SIGTERM, None)
        await wait_until(lambda: loopgate.drains == 1)
        with capture_logs() as logs:
            server.handle_exit(signal.SIGINT, None)
        assert server.should_exit
        assert [e["event"] for e in logs] == ["loopgate.drain_skipped"]
        await asyncio.wait_for(task, 10)  # gone without waiting for the drain
        assert not loopgate.release.is_set() and loopgate.drains == 1


async def test_a_failed_drain_still_exits() -> None:
    loopgate = FakeLoopgate()
    loopgate.error = RuntimeError("database gone")
    async with serving(loopgate) as (server, task, _url):
        with capture_logs() as logs:
            server.handle_exit(signal.SIGTERM, None)
            await wait_until(lambda: loopgate.drains == 1)
            loopgate.release.set()
            await asyncio.wait_for(task, 10)
        assert server.should_exit
        assert "loopgate.drain_failed" in [e["event"] for e in logs]


def test_a_signal_before_serving_is_a_plain_exit() -> None:
    loopgate = FakeLoopgate()
    server = Server(uvicorn.Config(Starlette()), cast(Loopgate, loopgate))
    server.handle_exit(signal.SIGTERM, None)  # no running loop to drain on
    assert server.should_exit and loopgate.drains == 0


@pytest.mark.parametrize("signals", [1, 3])
async def test_one_drain_however_the_callbacks_land(signals: int) -> None:
    loopgate = FakeLoopgate()
    async with serving(loopgate) as (server, _task, _url):
        server.handle_exit(signal.SIGTERM, None)
        for _ in range(signals - 1):
            server._start_drain()  # a callback scheduled twice starts one drain
        await wait_until(lambda: loopgate.drains == 1)
        await asyncio.sleep(0.05)  # a window in which a second drain must not start
        assert loopgate.drains == 1


async def test_the_drains_end_and_a_second_signal_wake_the_server_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The loop looks at should_exit once a tick; an hour-long tick shows that what ends the
    # server does not wait for one (each wait below is 10 s).
    monkeypatch.setattr(draining, "TICK_SECONDS", 3600.0)
    for second_signal in (False, True):
        loopgate = FakeLoopgate()
        async with serving(loopgate) as (server, task, url):
            async with httpx.AsyncClient() as http:
                date = (await http.get(url)).headers["date"]
            assert date.endswith(" GMT")  # the Date header is still set
            server.handle_exit(signal.SIGTERM, None)
            await wait_until(lambda lg=loopgate: lg.drains == 1)
            if second_signal:
                server.handle_exit(signal.SIGINT, None)
            else:
                loopgate.release.set()
            await asyncio.wait_for(task, 10)
