"""Pacing outgoing sends with token buckets, so Telegram's limits are met before it says 429.

Telegram allows about one message per second in a chat (short bursts are fine), 20 per minute
in a group, and 30 per second overall. Each send takes a token from its chat bucket, its group
bucket (groups only) and the global bucket; a bucket refills continuously and holds up to
``burst`` tokens, so the first few messages of a normal exchange are never delayed. Only message
sends and edits are paced: typing, reactions, deletions and draft previews do not spend the
budget (draft previews do wait out a hold: :meth:`SendPacer.held_for`).

With several processes (``shared``), the buckets and the holds live in a
:class:`~channels.protocol.PaceStore` all of them consult, so together they stay within the
bot's budget; while the store is unreachable each process paces in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from channels.pacing import SharedPacing
from channels.protocol import PaceBucket, PaceStore

MAX_TRACKED_CHATS = 10_000


@dataclass(frozen=True, slots=True)
class RateLimits:
    chat_per_second: float = 1.0
    chat_burst: int = 3
    group_per_minute: float = 20.0
    group_burst: int = 5
    global_per_second: float = 30.0
    global_burst: int = 30


class TokenBucket:
    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate  # tokens per second
        self.burst = float(burst)
        self.tokens = float(burst)
        self.updated = now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def delay(self, now: float) -> float:
        """Seconds until one token is available (0 when available now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self) -> None:
        self.tokens -= 1

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.burst


class SendPacer:
    """Waits until a send to ``chat_id`` is within every limit; ``limits=None`` never waits.

    A 429 from Telegram puts the chat on hold for ``retry_after`` (:meth:`hold`) whether pacing
    is on or not: Telegram's word beats our estimate.
    """

    def __init__(
        self,
        limits: RateLimits | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        shared: PaceStore | None = None,
        channel: str = "telegram",
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.shared = (
            SharedPacing(shared, channel=channel, clock=clock)
            if shared is not None and limits is not None
            else None
        )
        self._chats: dict[str, TokenBucket] = {}
        self._groups: dict[str, TokenBucket] = {}
        self._global = TokenBucket(
            limits.global_per_second if limits else 1.0,
            limits.global_burst if limits else 1,
            clock(),
        )
        self._held_until: dict[str, float] = {}

    def hold(self, chat_id: str, seconds: float) -> None:
        self._held_until[chat_id] = max(self._held_until.get(chat_id, 0.0), self.clock() + seconds)
        if self.shared is not None:
            self.shared.hold(f"chat:{chat_id}", seconds)

    def held_for(self, chat_id: str) -> float:
        """Seconds ``chat_id`` stays on hold after a 429 (0 when it is not held)."""
        return max(0.0, self._held_until.get(chat_id, 0.0) - self.clock())

    async def acquire(self, chat_id: str, *, group: bool) -> float:
        """Take one send token for ``chat_id``; returns how long it waited."""
        waited = 0.0
        while True:
            now = self.clock()
            wait = self._held_until.get(chat_id, 0.0) - now
            if self.shared is not None and wait <= 0:
                shared_wait = await self.shared.take(
                    self._shared_buckets(chat_id, group), hold=f"chat:{chat_id}"
                )
                if shared_wait is not None:
                    if shared_wait <= 0:
                        self._held_until.pop(chat_id, None)
                        return waited
                    await asyncio.sleep(shared_wait)
                    waited += shared_wait
                    continue
                now = self.clock()  # the store may have taken its time to fail
            buckets = self._buckets(chat_id, group, now)
            wait = max([wait, *(bucket.delay(now) for bucket in buckets)])
            if wait <= 0:
                for bucket in buckets:
                    bucket.take()
                self._held_until.pop(chat_id, None)
                return waited
            await asyncio.sleep(wait)
            waited += wait

    def _shared_buckets(self, chat_id: str, group: bool) -> list[PaceBucket]:
        limits = self.limits
        assert limits is not None  # no shared pacing without limits
        buckets = [
            PaceBucket(f"chat:{chat_id}", limits.chat_per_second, limits.chat_burst),
            PaceBucket("global", limits.global_per_second, limits.global_burst),
        ]
        if group:
            buckets.append(
                PaceBucket(f"group:{chat_id}", limits.group_per_minute / 60.0, limits.group_burst)
            )
        return buckets

    def _buckets(self, chat_id: str, group: bool, now: float) -> list[TokenBucket]:
        limits = self.limits
        if limits is None:
            return []
        self._prune(now)
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = TokenBucket(
                limits.chat_per_second, limits.chat_burst, now
            )
        buckets = [chat, self._global]
        if group:
            bucket = self._groups.get(chat_id)
            if bucket is None:
                bucket = self._groups[chat_id] = TokenBucket(
                    limits.group_per_minute / 60.0, limits.group_burst, now
                )
            buckets.append(bucket)
        return buckets

    def _prune(self, now: float) -> None:
        # A full bucket is the same as no bucket: forget idle chats so memory stays bounded.
        for table in (self._chats, self._groups):
            if len(table) > MAX_TRACKED_CHATS:
                for key in [k for k, b in table.items() if b.full(now)]:
                    del table[key]
