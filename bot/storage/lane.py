"""SQLite work run whole on threads of their own: one hop from the event loop.

Through the async engine, every statement is three or four round trips to aiosqlite's thread
(execute, fetch, close; then the commit), each behind a greenlet switch in SQLAlchemy's async
layer. A reply's writes are small transactions of one or two prebuilt statements, so those hops
were most of their cost: ~1 ms of CPU per transaction, against ~0.27 ms for the same
transaction run whole by SQLAlchemy's sync engine on a thread of its own (docs/performance.md,
round 5).

A lane's engine opens the same file with the same pragmas as the async one. A database has two
(``db.py``): one for write transactions, still taken in turn with all other writes
(``writer.py``), and one with two threads for the reply path's reads, which WAL lets run beside
the writer.

Each lane thread keeps its connection open between transactions: checking a connection out of
the pool and back in (with its reset) for every transaction cost SQLAlchemy about as much as the
transaction itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool, StaticPool

from bot.storage._sql import dump_json

T = TypeVar("T")


class SqliteLane:
    """``threads`` threads, a connection each; work runs there whole."""

    def __init__(
        self,
        url: URL,
        on_connect: Callable[[Any, ConnectionPoolEntry], None],
        name: str,
        *,
        threads: int = 1,
    ) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=f"sqlite-{name}")
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
        self._local = threading.local()
        self._connections: list[Connection] = []  # every thread's, for close()
        self._connections_lock = threading.Lock()

    async def read(self, work: Callable[[Connection], T]) -> T:
        """``work`` with a connection of the lane, on its thread (no transaction of its own)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._connected, work
        )

    def _connected(self, work: Callable[[Connection], T]) -> T:
        conn = self._connection()
        with conn.begin():  # ends the read, and with it its WAL snapshot, when work returns
            return work(conn)

    def _connection(self) -> Connection:
        """This thread's connection, opened on its first use (again if it was invalidated)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            if conn is not None:
                conn.close()
            conn = self._engine.connect()
            self._local.conn = conn
            with self._connections_lock:
                self._connections = [c for c in self._connections if not c.closed] + [conn]
        return conn

    async def run(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction on the lane's thread: committed when it returns, rolled
        back when it raises.

        A caller cancelled meanwhile still waits for the transaction to end before the
        cancellation goes on, so the writer slot it holds is never given to the next writer
        while this one is still running (the transaction commits or fails by itself).
        """
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._transaction, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        conn = self._connection()
        with conn.begin():
            return work(conn)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._dispose)
        self._executor.shutdown(wait=True)

    def _dispose(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:  # check_same_thread is off: any thread may close them
            conn.close()
        self._engine.dispose()
