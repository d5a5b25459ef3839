"""SQLite's one writer, taken in turn, with a lane for writes a platform is waiting on.

SQLite allows one writer at a time. Queueing writers in the event loop is cheaper and fairer
than letting them collide on the file lock, where SQLite's busy handler backs off in sleeps of up
to 100 ms. Under load the queue is long (history, traces, inbox records of running answers), and
an inbound message's insert would wait behind all of them while its platform waits for the
acknowledgement (Slack gives 3 s). So those inserts are *urgent*: they go before the queued
writes that nobody outside is waiting on; within a lane, first come first served.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress


class WriterQueue:
    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._normal: deque[asyncio.Future[None]] = deque()

    @property
    def busy(self) -> bool:
        """A write is under way (or handed to the next waiter)."""
        return self._held

    @asynccontextmanager
    async def hold(self, *, urgent: bool = False) -> AsyncIterator[None]:
        await self._acquire(urgent)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, urgent: bool) -> None:
        if not self._held:
            self._held = True
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._urgent if urgent else self._normal
        lane.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # it was handed to us as we were cancelled: pass it on
            else:
                with suppress(ValueError):
                    lane.remove(waiter)
            raise

    def _release(self) -> None:
        # The writer passes straight to the next waiter (``_held`` stays set), so nobody who
        # arrives meanwhile can overtake the queue.
        for lane in (self._urgent, self._normal):
            while lane:
                waiter = lane.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._held = False
