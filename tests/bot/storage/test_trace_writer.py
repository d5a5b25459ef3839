"""Traces written behind the runs (bot/storage/_trace_writer.py), on both backends."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection, func, select
from structlog.testing import capture_logs

from agent_core.tracing import SpanKind, Trace, new_trace
from bot.storage import Database, SqlTraceStore
from bot.storage._trace_writer import MAX_BATCH, TraceWriter
from bot.storage.models import SpanRow, TraceRow
from tests.storage_support import Backend


def _trace(run_id: str, spans: int = 1) -> Trace:
    trace = new_trace(run_id, "s", "agent")
    for n in range(spans):
        trace.start_span(SpanKind.TOOL, f"tool{n}").end()
    trace.finish("completed", output=run_id)
    return trace


def _count_rows(conn: Connection) -> tuple[int, int]:
    traces = conn.execute(select(func.count()).select_from(TraceRow)).scalar()
    spans = conn.execute(select(func.count()).select_from(SpanRow)).scalar()
    return int(traces or 0), int(spans or 0)


async def _counts(db: Database) -> tuple[int, int]:
    return await db.run_read(_count_rows)


def _count_writes(db: Database) -> list[int]:
    """The sizes of the batches ``db``'s trace writer writes from now on, in order."""
    writes: list[int] = []
    real_write = db.trace_writer._write

    async def counting(batch: list, **kw: bool) -> None:  # type: ignore[type-arg]
        writes.append(len(batch))
        await real_write(batch, **kw)

    db.trace_writer._write = counting  # type: ignore[method-assign]
    return writes


async def test_save_returns_before_the_write_and_readers_wait_for_it(db: Database) -> None:
    store = SqlTraceStore(db)
    # Held until the counts are read: a fast lane would otherwise win the race against them.
    written = asyncio.Event()
    real_write = db.trace_writer._write

    async def held(batch: list, **kw: bool) -> None:  # type: ignore[type-arg]
        await written.wait()
        await real_write(batch, **kw)

    db.trace_writer._write = held  # type: ignore[method-assign]
    await store.save_trace(_trace("run-1"))
    assert db.trace_writer.queued == 1  # handed over, not written yet
    assert await _counts(db) == (0, 0)
    # Another store on the same database (the dashboard, `loopgate traces`) sees it.
    reader = asyncio.create_task(SqlTraceStore(db).recent_traces())
    await asyncio.sleep(0.05)  # kept (negative check)
    assert not reader.done()  # it waits for the write
    written.set()
    [loaded] = await reader
    assert loaded.run_id == "run-1" and len(loaded.spans) == 2
    assert db.trace_writer.queued == 0


async def test_traces_queued_meanwhile_share_one_write(db: Database) -> None:
    store = SqlTraceStore(db)
    writes = _count_writes(db)
    for n in range(5):
        await store.save_trace(_trace(f"run-{n}", spans=2))
    await db.trace_writer.flush()
    assert writes == [5]
    assert await _counts(db) == (5, 15)


async def test_saving_a_written_trace_again_replaces_it(db: Database) -> None:
    store = SqlTraceStore(db)
    trace = _trace("run-1", spans=3)
    await store.save_trace(trace)
    await db.trace_writer.flush()
    trace.spans = trace.spans[:2]  # e.g. a retried save of a shorter trace
    trace.status = "error"
    await store.save_trace(trace)
    [loaded] = await store.recent_traces()
    assert loaded.status == "error" and len(loaded.spans) == 2
    assert await _counts(db) == (1, 2)


async def test_a_trace_saved_by_an_earlier_process_is_replaced(backend: Backend) -> None:
    trace = _trace("run-1", spans=2)
    async with await backend.open() as db:
        await SqlTraceStore(db).save_trace(trace)
    async with await backend.open() as db:  # a new process: it never wrote this id
        trace.status = "cancelled"
        others = [_trace("run-2")]
        await SqlTraceStore(db).save_trace(trace)
        await SqlTraceStore(db).save_trace(others[0])
        loaded = {t.run_id: t.status for t in await SqlTraceStore(db).recent_traces()}
        assert loaded == {"run-1": "cancelled", "run-2": "completed"}
        assert await _counts(db) == (2, 5)


async def test_closing_the_database_writes_what_is_queued(backend: Backend) -> None:
    async with await backend.open() as db:
        await SqlTraceStore(db).save_trace(_trace("run-1"))
        assert db.trace_writer.queued == 1
    async with await backend.open() as db:
        assert [t.run_id for t in await SqlTraceStore(db).recent_traces()] == ["run-1"]


async def test_a_failed_write_is_logged_and_later_traces_still_saved(db: Database) -> None:
    store = SqlTraceStore(db)
    broken = _trace("run-1")
    real_write = db.trace_writer._write
    calls = 0

    async def fail_once(batch: list, **kw: bool) -> None:  # type: ignore[type-arg]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("disk full")
        await real_write(batch, **kw)

    db.trace_writer._write = fail_once  # type: ignore[method-assign]
    with capture_logs() as logs:
        await store.save_trace(broken)
        await db.trace_writer.flush()  # the failure does not reach the reader
    assert [e["traces"] for e in logs if e["event"] == "trace.save_failed"] == [1]
    await store.save_trace(_trace("run-2"))
    assert [t.run_id for t in await store.recent_traces()] == ["run-2"]
    assert calls == 2


async def test_a_cancelled_reader_does_not_cancel_the_write(db: Database) -> None:
    store = SqlTraceStore(db)
    await store.save_trace(_trace("run-1"))
    reader = asyncio.ensure_future(store.recent_traces())
    await asyncio.sleep(0)  # kept: one yield, the reader starts (it is cancelled mid-way)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await db.trace_writer.flush()
    assert await _counts(db) == (1, 2)


async def test_a_reader_waits_only_for_what_was_queued_before_it(db: Database) -> None:
    store = SqlTraceStore(db)
    stop = asyncio.Event()

    async def keep_saving() -> None:  # runs never pause: the queue is never empty for long
        n = 0
        while not stop.is_set():
            await store.save_trace(_trace(f"more-{n}"))
            n += 1
            await asyncio.sleep(0)  # kept: a yield between saves (the simulated load)

    await store.save_trace(_trace("first"))
    saver = asyncio.ensure_future(keep_saving())
    try:
        await asyncio.wait_for(db.trace_writer.flush(), 5)
        query = select(TraceRow.id).where(TraceRow.run_id == "first")
        first = await db.run_read(lambda conn: conn.execute(query).scalar())
        assert first is not None
    finally:
        stop.set()
        await saver


async def test_traces_saved_apart_wait_for_one_write_and_a_reader_does_not_wait_the_delay(
    db: Database,
) -> None:
    db.trace_writer = TraceWriter(db, delay=60)  # far longer than the test may take
    store = SqlTraceStore(db)
    writes = _count_writes(db)
    await store.save_trace(_trace("run-1"))
    await asyncio.sleep(0.05)  # kept: the writer is waiting for company, not writing
    await store.save_trace(_trace("run-2"))
    await asyncio.sleep(0.05)  # kept (negative check)
    assert writes == [] and db.trace_writer.queued == 2
    loaded = await asyncio.wait_for(store.recent_traces(), 10)  # not 60
    assert sorted(t.run_id for t in loaded) == ["run-1", "run-2"]
    assert writes == [2]


async def test_a_lone_trace_is_written_after_the_delay_without_a_reader(db: Database) -> None:
    db.trace_writer = TraceWriter(db, delay=0.05)
    await SqlTraceStore(db).save_trace(_trace("run-1"))
    for _ in range(200):
        if await _counts(db) == (1, 2):
            break
        await asyncio.sleep(0.05)  # kept: polled, another process reads the table this way
    assert await _counts(db) == (1, 2)


async def test_a_full_batch_is_written_without_waiting_out_the_delay(db: Database) -> None:
    db.trace_writer = TraceWriter(db, delay=60)
    store = SqlTraceStore(db)
    for n in range(MAX_BATCH):
        await store.save_trace(_trace(f"run-{n}", spans=0))
    for _ in range(200):
        if db.trace_writer.queued == 0 and (await _counts(db))[0] == MAX_BATCH:
            break
        await asyncio.sleep(0.05)  # kept: polled until the write lands
    assert await _counts(db) == (MAX_BATCH, MAX_BATCH)
