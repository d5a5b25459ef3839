"""Locks shared with the other processes of a service, lent to agent_core by the bot.

agent_core knows nothing of Redis: with several processes, ``bot/cluster`` hands a
:class:`SharedLocks` to each :class:`~agent_core.loop.Loop`; without one every lock here is the
in-process one it always was.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Lease(Protocol):
    async def release(self) -> None:
        """Give the lock back (only if it is still this holder's). Never raises."""


class SharedLocks(Protocol):
    async def try_acquire(self, name: str) -> Lease | None:
        """The lock ``name``, kept until released (or until its holder dies and it expires);
        None when another holder has it. Raises when the lock service is unreachable."""


async def acquire_waiting(
    locks: SharedLocks, name: str, *, patience: float, every: float = 0.05
) -> Lease | None:
    """The lock ``name``, waiting up to ``patience`` seconds for its holder to release it; None
    when it is still held then. Raises like :meth:`SharedLocks.try_acquire`."""
    deadline = time.monotonic() + patience
    while True:
        lease = await locks.try_acquire(name)
        if lease is not None or time.monotonic() >= deadline:
            return lease
        await asyncio.sleep(every)
