"""Serving a fake platform's ASGI app on 127.0.0.1 inside the test's own event loop.

Every fake (LLM, Telegram, Slack, Zalo, Anthropic) is a real HTTP server so the real client
libraries talk to it over TCP; this is the one place that knows how to start and stop uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

from tests.waiting import wait_until


class _Server(uvicorn.Server):
    """uvicorn without signal handling (the test runner keeps its Ctrl+C), and stopped as soon as
    its connections are: uvicorn looks at its exit flag every 0.1 s, sleeps 0.1 s more once
    shutting down and polls its connections every 0.1 s, 0.18 s per stop on average, which was
    two thirds of ``tests/channels``' time (59 of 90 s) and minutes of the suite's. The graceful
    part is kept: connections are asked to close and waited for, only in steps of 2 ms."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864_000  # as uvicorn's: on_tick refreshes the Date header
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # an idle keep-alive one closes; a busy one after its answer
        state = self.server_state
        try:
            await wait_until(
                lambda: not (state.connections or state.tasks),
                self.config.timeout_graceful_shutdown,
                interval=0.002,
            )
        except TimeoutError:  # WaitTimeout is one
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()


class LoopbackServer:
    def __init__(
        self,
        app: ASGIApp,
        *,
        name: str,
        ws: Literal["none", "auto", "websockets", "websockets-sansio"] = "none",
        graceful_shutdown: float = 5.0,
        ws_ping_interval: float | None = 20.0,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
    ) -> None:
        """``ssl_certfile``/``ssl_keyfile``: serve HTTPS with this certificate (PEM files)."""
        self.name = name
        self._config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,  # a free port, read back once listening
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws=ws,
            ws_ping_interval=ws_ping_interval,
            timeout_graceful_shutdown=int(graceful_shutdown),
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
        )
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> int:
        self._server = _Server(self._config)
        server, task = self._server, asyncio.create_task(self._server.serve())
        self._task = task
        # uvicorn only flips a flag once listening: poll it (or the task's early end).
        await wait_until(lambda: server.started or task.done(), 30, interval=0.005)
        if not server.started:
            await task
            raise RuntimeError(f"{self.name} failed to start")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.stopping.set()
        await self._task
        self._server = self._task = None
