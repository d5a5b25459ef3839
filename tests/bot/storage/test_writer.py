"""SQLite's writer queue: one holder, urgent waiters first, cancellation never loses the writer."""

from __future__ import annotations

import asyncio

from bot.storage._writer import WriterQueue


async def test_urgent_writes_go_before_queued_ones_and_each_lane_is_fifo() -> None:
    queue = WriterQueue()
    order: list[str] = []
    release_first = asyncio.Event()

    async def write(name: str, *, urgent: bool = False, until: asyncio.Event | None = None) -> None:
        async with queue.hold(urgent=urgent):
            order.append(name)
            if until is not None:
                await until.wait()

    first = asyncio.create_task(write("first", until=release_first))
    await asyncio.sleep(0)  # kept: one yield, the tasks so far reach the queue in order
    waiting = [
        asyncio.create_task(write("history")),
        asyncio.create_task(write("trace")),
        asyncio.create_task(write("inbound 1", urgent=True)),
        asyncio.create_task(write("inbound 2", urgent=True)),
    ]
    await asyncio.sleep(0)  # kept: one yield, the tasks so far reach the queue in order
    assert order == ["first"]  # one writer at a time
    release_first.set()
    await asyncio.gather(first, *waiting)
    assert order == ["first", "inbound 1", "inbound 2", "history", "trace"]


async def test_a_cancelled_waiter_neither_blocks_nor_loses_the_writer() -> None:
    queue = WriterQueue()
    release = asyncio.Event()
    done: list[str] = []

    async def write(name: str, until: asyncio.Event | None = None) -> None:
        async with queue.hold():
            if until is not None:
                await until.wait()
            done.append(name)

    holder = asyncio.create_task(write("holder", release))
    await asyncio.sleep(0)  # kept: one yield, the tasks so far reach the queue in order
    cancelled = asyncio.create_task(write("cancelled"))
    after = asyncio.create_task(write("after"))
    await asyncio.sleep(0)  # kept: one yield, the tasks so far reach the queue in order
    cancelled.cancel()
    await asyncio.sleep(0)  # kept: one yield, the tasks so far reach the queue in order
    release.set()
    await asyncio.wait_for(asyncio.gather(holder, after), 1)
    assert done == ["holder", "after"] and cancelled.cancelled()


async def test_a_waiter_cancelled_as_the_writer_is_handed_to_it_passes_it_on() -> None:
    queue = WriterQueue()
    holder = queue.hold()
    await holder.__aenter__()
    handed = asyncio.create_task(queue.hold().__aenter__())
    after = asyncio.create_task(queue.hold().__aenter__())
    await asyncio.sleep(0)  # kept: one yield, both are waiting
    await holder.__aexit__(None, None, None)  # the writer is handed to ``handed``...
    handed.cancel()  # ...which is cancelled before it could resume
    await asyncio.gather(handed, return_exceptions=True)
    assert handed.cancelled()
    await asyncio.wait_for(after, 1)  # it was passed on, not lost
