"""What every fake platform server shares: a real HTTP server on 127.0.0.1, its lifecycle and
waiting for what reaches it.

A fake (:class:`~tests.fakes.telegram_server.FakeTelegram`, ``FakeSlack``, ``FakeZalo``,
``FakeLLM``, ``FakeAnthropic``) subclasses :class:`FakeServer`, builds its ASGI app in
:meth:`FakeServer.app` and calls :meth:`FakeServer.changed` whenever its state changes (a request
recorded, an update queued), so that :meth:`FakeServer.wait_for` re-checks a test's condition::

    async with FakeZalo() as zalo:                  # start() on a free port, stop() at the end
        ... talk to zalo.base_url ...
        await zalo.wait_for(lambda: zalo.messages)  # no sleeps

On ``stop()`` the :attr:`FakeServer.closing` event is set first: long polls, delayed and stalled
answers wait on it so that shutdown does not wait for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Self

from starlette.types import ASGIApp

from tests.fakes.loopback import LoopbackServer
from tests.waiting import Changes

__all__ = ["FakeServer"]


class FakeServer:
    name: ClassVar[str] = "FakeServer"
    url_path: ClassVar[str] = ""
    """Appended to ``http://127.0.0.1:<port>`` in :attr:`base_url` (``/v1``, ``/api/``)."""
    ws: ClassVar[Literal["none", "auto", "websockets", "websockets-sansio"]] = "none"
    ws_ping_interval: ClassVar[float | None] = 20.0
    graceful_shutdown: ClassVar[float] = 5.0
    recheck: ClassVar[float | None] = 0.05
    """:meth:`wait_for` also re-checks this often: a test's condition may involve client state
    (the bot's own bookkeeping) that no request announces."""

    def __init__(self) -> None:
        self._loopback: LoopbackServer | None = None
        self._port: int | None = None
        self._closing = asyncio.Event()
        self._changes = Changes()

    # -- for subclasses --------------------------------------------------------------------

    def app(self) -> ASGIApp:
        raise NotImplementedError

    async def before_stop(self) -> None:
        """Release what the fake holds (sockets, held answers); ``closing`` is already set."""

    def server_options(self) -> dict[str, Any]:
        """Extra :class:`LoopbackServer` options (``ssl_certfile``/``ssl_keyfile`` for HTTPS)."""
        return {}

    def timeout_detail(self) -> str:
        """What a :meth:`wait_for` that timed out adds to its message (the last requests)."""
        return ""

    def changed(self) -> None:
        """Wake :meth:`wait_for` and the fake's own waits: the state changed."""
        self._changes.notify()

    async def next_change(self, timeout: float | None = None) -> bool:
        """Wait for the next :meth:`changed` (False when ``timeout`` passed first)."""
        return await self._changes.wait(timeout)

    @property
    def closing(self) -> asyncio.Event:
        return self._closing

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._loopback is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.url_path}"

    async def start(self) -> None:
        self._closing = asyncio.Event()
        self._loopback = LoopbackServer(
            self.app(),
            name=self.name,
            ws=self.ws,
            ws_ping_interval=self.ws_ping_interval,
            graceful_shutdown=self.graceful_shutdown,
            **self.server_options(),
        )
        self._port = await self._loopback.start()

    async def stop(self) -> None:
        if self._loopback is None:
            return
        self._closing.set()  # ends long polls and delayed answers so shutdown doesn't wait
        await self.before_stop()
        self.changed()
        await self._loopback.stop()
        self._loopback = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- waiting ---------------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> None:
        """Return once ``predicate()`` holds; fail the test (``WaitTimeout``) after
        ``timeout`` seconds."""
        await self._changes.wait_for(
            predicate,
            timeout,
            recheck=self.recheck,
            what=lambda: f"{self.name}: {self.timeout_detail()}",
        )
