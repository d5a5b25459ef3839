"""Ctrl-C or SIGTERM while ``loopgate serve`` starts: stop starting, close what was opened, and
exit as the signal asks (130 for Ctrl-C, as a shell reports it), without a traceback.

Once it serves, uvicorn takes both signals (``bot/http/draining.py``: drain, then stop). Before
that, asyncio's runner would cancel the start wherever it stands; landing in uvicorn's own
start-up, the cancellation left its lifespan task to log a traceback at exit. So from the start
to the hand-over the signals are handled here: the first one cancels the start
(``Loopgate.start`` closes what it had opened) or, once it is done, keeps the server from
starting.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable
from types import FrameType, TracebackType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)


class StartSignals:
    """``with StartSignals() as signals: await signals.run(start)``; then :meth:`release` the
    signals to the server and check :attr:`received` before it serves."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._task: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> StartSignals:
        self._loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in HANDLED}
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def release(self) -> None:
        """Give the signals back to the handlers from before (asyncio's runner's): call it
        right before the server serves, which installs its own at once."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    @property
    def exit_code(self) -> int:
        """What a shell reports for a command its signal ended (130 for Ctrl-C)."""
        return 128 + (self.received or 0)

    async def run(self, start: Awaitable[None]) -> bool:
        """Await ``start``; False when a signal cancelled it (``Loopgate.start`` then closed
        what it had opened)."""
        self._task = asyncio.ensure_future(start)
        try:
            await self._task
        except asyncio.CancelledError:
            if self.received is None:
                raise  # cancelled from outside, not by us
            return False
        finally:
            self._task = None
        return True  # started: a signal since then is in received, for the caller to see

    def _handle(self, sig: int, frame: FrameType | None) -> None:
        if self.received is not None:  # a second one: stop now, as uvicorn's force exit does
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)
            return
        self.received = sig
        task, loop = self._task, self._loop
        if task is not None and loop is not None:
            # A signal handler interrupts the loop anywhere: only hand it a callback.
            loop.call_soon_threadsafe(task.cancel)
