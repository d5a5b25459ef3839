"""SIGTERM as a PaaS sends it: drain first, then let uvicorn shut down.

Plain uvicorn stops listening at once on SIGTERM, so a webhook would get "connection refused"
and ``/healthz`` nothing at all. Here the first SIGTERM (or Ctrl-C) starts
:meth:`bot.app.Loopgate.drain` while the server keeps answering: webhooks are still taken
(commands act, messages are stored for the next process), ``/healthz`` answers 503
``draining`` so a load balancer sends new traffic elsewhere. When the drain is over, uvicorn
shuts down as usual and the app's lifespan closes Loopgate. A second signal skips the rest of
the grace.
"""

from __future__ import annotations

import asyncio
import socket
from contextlib import suppress
from types import FrameType

import structlog

from bot.app import Loopgate
from bot.http.uvicorn_config import uvicorn

log = structlog.get_logger(__name__)

TICK_SECONDS = 1.0
"""How often the server's loop looks at ``should_exit`` and refreshes the ``Date`` header when
nothing wakes it. uvicorn's own looks ten times a second, a wake-up an idle process pays ten
times over (issue 33's idle budget); what ends the server here wakes it at once."""


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, loopgate: Loopgate) -> None:
        super().__init__(config)
        self.loopgate = loopgate
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None
        self._drain_requested = False
        self._wake = asyncio.Event()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self._drain_requested and not self.should_exit and self._loop is not None:
            self._drain_requested = True
            # Remembered so uvicorn re-raises it at the end: the exit status stays -SIGTERM.
            self._captured_signals.append(sig)
            # A signal handler interrupts the loop anywhere: only hand it a callback.
            self._loop.call_soon_threadsafe(self._start_drain)
            return
        log.info("loopgate.drain_skipped", signal=sig)
        super().handle_exit(sig, frame)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def main_loop(self) -> None:
        # uvicorn's loop, one look a second instead of ten; ``on_tick`` refreshes the Date
        # header when its counter is a multiple of ten, which it now always is.
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000
            with suppress(TimeoutError):
                async with asyncio.timeout(TICK_SECONDS):
                    await self._wake.wait()
            self._wake.clear()  # what set it set should_exit first: on_tick sees that
            should_exit = await self.on_tick(counter)

    def _start_drain(self) -> None:
        if self._drain is None:
            self._drain = asyncio.create_task(self._drain_then_exit(), name="loopgate:drain")

    async def _drain_then_exit(self) -> None:
        try:
            await self.loopgate.drain()
        except Exception:
            log.exception("loopgate.drain_failed")
        finally:
            self.should_exit = True
            self._wake.set()
