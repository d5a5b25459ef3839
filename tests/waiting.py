"""Waiting for a condition instead of sleeping for a fixed time.

Two tools, used by the tests, the support modules and the fake servers alike:

* :func:`wait_until` polls a condition (a plain or async callable) until it holds, with a
  deadline; for state nothing announces (a registry, a database row, a process's answer).
* :class:`Changes` is a wake-up signal a fake (or a recorder) fires on every change it makes;
  :meth:`Changes.wait_for` re-checks a condition after each change instead of polling.

A wait that runs out raises :class:`WaitTimeout`, both an ``AssertionError`` (a test failure
saying what was waited for) and a ``TimeoutError`` (what ``asyncio.wait_for`` raised before).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["Changes", "WaitTimeout", "wait_until", "wait_until_sync"]

T = TypeVar("T")


class WaitTimeout(TimeoutError, AssertionError):
    """A condition was not met in time."""


def _describe(timeout: float, what: str | Callable[[], str] | None) -> str:
    detail = what() if callable(what) else what
    return f"not met in {timeout}s" + (f": {detail}" if detail else "")


async def wait_until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    what: str | Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` every ``interval`` seconds until it is truthy; return its value.

    ``what`` (a text, or a callable giving one when the time is up) says what was awaited.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise WaitTimeout(_describe(timeout, what))
        await asyncio.sleep(interval)  # the poll interval, not a synchronisation


def wait_until_sync(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    what: str | Callable[[], str] | None = None,
) -> T:
    """:func:`wait_until` for a thread that has no event loop (blocking)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            raise WaitTimeout(_describe(timeout, what))
        time.sleep(interval)  # the poll interval, not a synchronisation
    return value


class Changes:
    """A wake-up signal: :meth:`notify` on every change, waiters re-check their condition.

    Each :meth:`notify` wakes every waiter of the moment (a fresh event per generation, so no
    waiter misses a change that happened while it was checking).
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for the next change; False when ``timeout`` passed first."""
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = 10.0,
        *,
        recheck: float | None = None,
        what: str | Callable[[], str] | None = None,
    ) -> None:
        """Return once ``predicate()`` holds, checking it again after every change (and every
        ``recheck`` seconds too, for conditions that also change where nobody notifies)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise WaitTimeout(_describe(timeout, what))
            await self.wait(remaining if recheck is None else min(remaining, recheck))
