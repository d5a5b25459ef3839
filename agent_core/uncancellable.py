"""Finishing short clean-up work (saving a trace) inside a task that is being cancelled.

``asyncio.shield`` alone is not enough: a second cancel (``/stop`` then shutdown) makes the
outer ``await`` return at once and leaves the shielded work running detached, so shutdown
closes the database under it and its connection is later garbage-collected unclosed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")

CLEANUP_TIMEOUT_S = 10.0


async def finish_despite_cancel(
    work: Coroutine[Any, Any, T], *, grace: float = CLEANUP_TIMEOUT_S, name: str = "cleanup"
) -> T | None:
    """Run ``work`` to its end even if the caller is cancelled meanwhile, then re-raise.

    Waits at most ``grace`` seconds once a cancellation arrived, so a hung database cannot
    hold shutdown forever; after that the work is cancelled too and ``None`` is returned (or
    the cancellation re-raised).
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    loop = asyncio.get_running_loop()
    deadline: float | None = None
    while not task.done():
        try:
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            await asyncio.wait_for(asyncio.shield(task), remaining)
        except asyncio.CancelledError:
            cancelled = True
            if deadline is None:
                deadline = loop.time() + grace
        except TimeoutError:
            log.warning("cleanup.timed_out", work=name, grace_s=grace)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            break
        except Exception:
            break  # the work's own error: task.result() below raises it
    if task.cancelled():
        if cancelled:
            raise asyncio.CancelledError
        return None
    if cancelled:
        if (error := task.exception()) is not None:  # retrieved, so asyncio does not warn
            log.warning("cleanup.failed", work=name, error=repr(error))
        raise asyncio.CancelledError
    return task.result()


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended.

    The usual ``with suppress(CancelledError): await task`` also swallows a cancellation of
    the *caller* that arrives while it waits: a run stopped (``/stop``) just as it released a
    lock would then carry on as if nothing happened. Here that cancellation propagates,
    unless the caller was being cancelled already when it called: it is then cleaning up after
    that cancellation (a ``finally``), and neither that one nor a repeat of it (``/stop``
    twice, a stop then shutdown) may cut the rest of its clean-up short.
    """
    current = asyncio.current_task()
    cleaning_up = current is not None and current.cancelling() > 0
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if current is not None and current.cancelling() and not cleaning_up:
            raise


def stop_if_cancelled(error: BaseException | None = None) -> None:
    """For the ``except Exception`` of a background loop, and the top of each of its rounds:
    re-raise as a cancellation when this task was asked to stop meanwhile.

    A cancellation can come back from a Redis call as another error (a client tearing its
    connection down mid-command), or not at all (Python 3.11's ``asyncio.wait_for`` returns the
    result when it arrives with the cancellation), and a loop that logs errors and goes on
    would then never end: its owner's ``aclose`` waited for it forever (seen in CI twice, a
    cluster test's teardown hung on ``cluster:runs-refresh``, cancelling yet asleep again).
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from error
