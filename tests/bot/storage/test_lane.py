"""``Database.run_write``: a write transaction run whole, on a SQLite file in one hop to the
lane's thread (bot/storage/_lane.py), an in-memory SQLite database on its one lane, Postgres
through the async engine."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from bot.storage import Database, open_database
from bot.storage._lane import SqliteLane
from bot.storage._state import SqlChannelState
from tests.waiting import wait_until


def _put(key: str, value: str) -> Callable[[Connection], str]:
    def work(conn: Connection) -> str:
        conn.execute(
            text(
                "INSERT INTO channel_state (channel, key, value, updated_at) "
                "VALUES ('t', :key, :value, CURRENT_TIMESTAMP)"
            ),
            {"key": key, "value": value},
        )
        return threading.current_thread().name

    return work


async def test_it_commits_what_the_work_wrote_and_returns_its_value(db: Database) -> None:
    thread = await db.run_write(_put("k", "v"))
    assert await SqlChannelState(db).get("t", "k") == "v"
    if db.dialect == "sqlite":  # a file: the lane's thread, not the event loop's
        assert thread.startswith("sqlite-writes")


async def test_reads_see_what_was_committed_and_run_on_their_own_lane(db: Database) -> None:
    def read(conn: Connection) -> tuple[str | None, str]:
        value = conn.scalar(text("SELECT value FROM channel_state WHERE key = 'k'"))
        return value, threading.current_thread().name

    assert (await db.run_read(read))[0] is None
    await db.run_write(_put("k", "v"))
    value, thread = await db.run_read(read)
    assert value == "v"
    if db.dialect == "sqlite":
        assert thread.startswith("sqlite-reads")


async def test_a_slow_read_does_not_hold_up_the_next(tmp_path: Path) -> None:
    done: list[str] = []
    begun: list[str] = []

    def read(name: str, seconds: float) -> Callable[[Connection], None]:
        def work(conn: Connection) -> None:
            conn.execute(text("SELECT 1"))
            begun.append(name)
            time.sleep(seconds)  # kept: a slow read
            done.append(name)

        return work

    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        slow = asyncio.create_task(db.run_read(read("slow", 0.5)))
        await wait_until(lambda: begun)
        await db.run_read(read("quick", 0))
        assert done == ["quick"]  # on the other reader, while the slow one still runs
        await slow
        assert done == ["quick", "slow"]


async def test_a_failing_work_writes_nothing(db: Database) -> None:
    def half_then_fail(conn: Connection) -> None:
        _put("half", "v")(conn)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await db.run_write(half_then_fail)
    assert await SqlChannelState(db).get("t", "half") is None
    await db.run_write(_put("half", "w"))  # the lane still works
    assert await SqlChannelState(db).get("t", "half") == "w"


async def test_a_cancelled_caller_keeps_the_writer_slot_until_its_transaction_ends(
    tmp_path: Path,
) -> None:
    order: list[str] = []

    def slow(conn: Connection) -> None:
        order.append("slow started")
        _put("slow", "v")(conn)
        time.sleep(0.3)  # kept: a slow transaction
        order.append("slow ended")

    def next_one(conn: Connection) -> None:
        order.append("next started")
        _put("next", "v")(conn)

    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        first = asyncio.create_task(db.run_write(slow))
        await wait_until(lambda: order)
        second = asyncio.create_task(db.run_write(next_one))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert order == ["slow started", "slow ended"]  # the cancel waited for the thread
        await second
        assert order[-1] == "next started"
        state = SqlChannelState(db)
        # the transaction was past the point of no return: it committed by itself
        assert await state.get("t", "slow") == "v" and await state.get("t", "next") == "v"


async def test_in_memory_sqlite_writes_and_reads_through_its_one_shared_connection() -> None:
    async with await open_database("sqlite+aiosqlite://") as db:
        thread = await db.run_write(_put("k", "v"))
        assert thread == "sqlite-memory_0"  # a new connection would see another, empty db
        assert await db.run_read(lambda conn: threading.current_thread().name) == thread
        assert await SqlChannelState(db).get("t", "k") == "v"


async def test_a_lane_keeps_its_connection_and_holds_no_transaction_between_works(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.db"

    async with await open_database(f"sqlite+aiosqlite:///{path}") as db:
        first = await db.run_write(lambda conn: conn)
        await db.run_write(_put("k", "v"))
        assert await db.run_write(lambda conn: conn) is first  # no checkout per transaction
        assert await db.run_read(lambda conn: conn.in_transaction())  # inside a read: yes
        await db.run_read(lambda conn: conn.scalar(text("SELECT count(*) FROM channel_state")))
        # Between works neither lane holds a transaction (a read's WAL snapshot would keep
        # a checkpoint from finishing): a TRUNCATE checkpoint completes, and empties the WAL.
        other = sqlite3.connect(path)
        try:
            busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            other.close()
        assert busy == 0
        assert (tmp_path / "x.db-wal").stat().st_size == 0


async def test_a_lane_replaces_an_invalidated_connection(tmp_path: Path) -> None:
    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/x.db") as db:
        await db.run_write(_put("a", "v"))

        def lose_connection(conn: Connection) -> None:  # as a driver error would
            conn.invalidate()
            raise sqlite3.OperationalError("disk I/O error")

        with pytest.raises(sqlite3.OperationalError):
            await db.run_write(lose_connection)
        await db.run_write(_put("b", "v"))  # on a new connection
        state = SqlChannelState(db)
        assert await state.get("t", "a") == "v" and await state.get("t", "b") == "v"


async def test_closing_finishes_the_work_already_handed_over(tmp_path: Path) -> None:
    path = tmp_path / "x.db"

    running = threading.Event()

    def slow(conn: Connection) -> str:
        running.set()
        time.sleep(0.2)  # kept: a slow write
        return _put("late", "v")(conn)

    db = await open_database(f"sqlite+aiosqlite:///{path}")
    pending = asyncio.create_task(db.run_write(slow))
    await wait_until(running.is_set)  # handed over, still running
    await db.aclose()
    assert (await asyncio.wait_for(pending, 5)).startswith("sqlite-")
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT value FROM channel_state WHERE key = 'late'").fetchone() == (
            "v",
        )


async def test_a_connection_that_fails_to_open_fails_that_work_only(tmp_path: Path) -> None:
    attempts: list[int] = []

    def flaky_connect(dbapi_connection: object, record: object) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("unable to open database file")

    lane = SqliteLane(make_url(f"sqlite:///{tmp_path}/x.db"), flaky_connect, "t")
    try:
        # Through read(): a regression would leave the caller waiting, and a read's wait can
        # be cut short (run() waits out its work); both take the same path on the thread.
        with pytest.raises(OperationalError, match="unable to open"):
            await asyncio.wait_for(lane.read(lambda conn: conn.scalar(text("SELECT 1"))), 5)
        assert await asyncio.wait_for(lane.run(lambda conn: conn.scalar(text("SELECT 1"))), 5) == 1
    finally:
        await lane.close()
