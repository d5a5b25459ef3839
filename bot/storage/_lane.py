"""SQLite work run whole on threads of their own: one hop from the event loop.

Through SQLAlchemy's async engine, every statement was three or four round trips to aiosqlite's
thread (execute, fetch, close; then the commit), each behind a greenlet switch in SQLAlchemy's
async layer. A reply's writes are small transactions of one or two prebuilt statements, so those
hops were most of their cost: ~1 ms of CPU per transaction, against ~0.27 ms for the same
transaction run whole by SQLAlchemy's sync engine on a thread of its own (docs/performance.md,
round 5). Since issue 33 every SQLite statement runs on a lane, and the async layer (with the
ORM it imports) is not loaded at all on SQLite.

A database file has two lanes (``_db.py``): one for write transactions, still taken in turn
with all other writes (``_writer.py``), and one with two threads for reads, which WAL lets run
beside the writer. An in-memory database has one lane and one connection for both.

Each lane thread keeps its connection open between transactions (checking a connection out of
the pool and back in, with its reset, cost SQLAlchemy about as much as the transaction itself),
and takes its work from a plain queue and hands the result back with one
``call_soon_threadsafe`` (``run_in_executor``'s concurrent future, its chaining callbacks and its
coroutine-function check cost as much again as the hop itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool, StaticPool

from bot.storage._sql import dump_json

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[Connection], Any]]


class SqliteLane:
    """``threads`` threads, a connection each; work runs there whole, in one transaction."""

    def __init__(
        self,
        url: URL,
        on_connect: Callable[[Any, ConnectionPoolEntry], None],
        name: str,
        *,
        threads: int = 1,
    ) -> None:
        pool: dict[str, Any] = {"poolclass": StaticPool}
        if threads > 1:  # as many connections as threads, so no two share one
            pool = {"poolclass": QueuePool, "pool_size": threads, "max_overflow": 0}
        self._engine = create_engine(
            url.set(drivername="sqlite"),
            # Connections are opened and used on the lane's threads; the flag lets close()
            # dispose of them from whichever thread shuts the process down.
            connect_args={"check_same_thread": False},
            json_serializer=dump_json,
            **pool,
        )
        event.listen(self._engine, "connect", on_connect)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # Daemon threads: a process that never closes its database must still be able to exit
        # (a transaction cut short by that is rolled back by SQLite).
        self._threads = [
            threading.Thread(target=self._serve, name=f"sqlite-{name}_{n}", daemon=True)
            for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    async def read(self, work: Callable[[Connection], T]) -> T:
        """``work`` with a connection of the lane, on one of its threads, in a transaction
        ended when it returns (so no WAL snapshot outlives it). For reads: a caller cancelled
        meanwhile does not wait for it."""
        result: T = await self._submit(work)
        return result

    async def run(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction on the lane's thread: committed when it returns, rolled
        back when it raises.

        A caller cancelled meanwhile still waits for the transaction to end before the
        cancellation goes on, so the writer slot it holds is never given to the next writer
        while this one is still running (the transaction commits or fails by itself).
        """
        future = self._submit(work)
        try:
            result: T = await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise
        return result

    def _submit(self, work: Callable[[Connection], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, work))
        return future

    def _serve(self) -> None:
        conn: Connection | None = None
        try:
            while (job := self._jobs.get()) is not None:
                loop, future, work = job
                try:
                    if conn is None or conn.invalidated:  # first use, or lost to a driver error
                        if conn is not None:
                            conn.close()
                        conn = None
                        conn = self._engine.connect()  # failing, it fails this work only
                    with conn.begin():
                        result = work(conn)
                except BaseException as exc:  # the caller's to handle, like any await
                    _settle_soon(loop, future, None, exc)
                else:
                    _settle_soon(loop, future, result, None)
        finally:
            if conn is not None:
                conn.close()

    async def close(self) -> None:
        """Finish the work already handed over, then close every connection."""
        for _ in self._threads:
            self._jobs.put(None)
        await asyncio.to_thread(self._join_and_dispose)

    def _join_and_dispose(self) -> None:
        for thread in self._threads:
            thread.join()
        self._engine.dispose()


def _settle_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, result, exc)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():  # its caller was cancelled (a read)
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)
