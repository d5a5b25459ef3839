"""Taking updates in: the acknowledgement rules every adapter shares.

A platform considers an update delivered once we acknowledge it (a webhook's 2xx, a confirmed
offset, a Socket Mode ack), so an adapter acknowledges only after the bot's handler has stored the
message. When it has not (:class:`~channels.errors.NotAccepted`), whatever the adapter recorded as
seen is forgotten, or the platform's redelivery would be skipped as a duplicate.

:class:`Intake` is the gate a graceful shutdown closes first (``Channel.stop_receiving``): new
webhooks get 503 so the platform delivers them again later, while the hand-overs under way finish,
because their platform is waiting for our answer to consider them delivered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import structlog

from channels.errors import NotAccepted
from channels.protocol import SeenStore

log = structlog.get_logger(__name__)

CLOSE_GRACE = 10.0
"""Seconds :meth:`Intake.close` waits for the hand-overs under way (each is one database insert;
this only bounds a handler that hangs)."""


class Intake:
    """Whether a channel still takes updates in, and how many hand-overs are under way."""

    def __init__(self) -> None:
        self.open = True
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextmanager
    def handing_over(self) -> Iterator[None]:
        """Count one update being handed over; :meth:`close` waits for it."""
        self._busy += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()

    async def close(self, *, grace: float = CLOSE_GRACE) -> int:
        """Refuse new updates and wait for those being handed over; returns how many are still
        unfinished after ``grace`` seconds. Idempotent."""
        self.open = False
        with suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        return self._busy


async def already_seen(seen: SeenStore, key: str, *, channel: str) -> bool:
    """Whether the update ``key`` was taken before, without recording it.

    An update counts as seen only once the bot has it: :func:`remember_seen` records it after
    the handler returned. A store that can't answer makes the update :class:`NotAccepted`.
    """
    try:
        return await seen.has_seen(key)
    except Exception as exc:
        log.warning("inbound.seen_store_failed", channel=channel, error=repr(exc))
        raise NotAccepted(f"{channel}: the dedupe store is unavailable") from exc


async def remember_seen(seen: SeenStore, key: str, *, channel: str) -> None:
    """Record the update ``key`` once the bot has taken it. A failure is only logged: the
    message itself is stored with its own dedupe key, so a redelivery is still one message."""
    try:
        await seen.seen(key)
    except Exception as exc:
        log.warning("inbound.seen_record_failed", channel=channel, key=key, error=repr(exc))
