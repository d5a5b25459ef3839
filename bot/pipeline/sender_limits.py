"""Per-sender rate limits: how many runs one person may cost, per channel.

A flood in an open group or DM must not become as many LLM runs. The limit is a token bucket
in GCRA form (one "theoretical arrival time" per sender): ``burst`` messages at once, then one
every ``60 / per_minute`` seconds. Unlike a fixed window it never allows a double burst across a
window boundary. :class:`SenderLimiter` is the small interface a Redis-backed limiter will
implement when several processes share the work; :class:`MemorySenderLimiter` is the one-process
implementation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from bot.config import Config
from bot.pipeline.access import configured_admin
from bot.pipeline.delivery import send_with_retry
from channels import Channel, ChatType, InboundMessage

log = structlog.get_logger(__name__)

NOTICE_EVERY_SECONDS = 60.0
MAX_TRACKED_SENDERS = 100_000


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    retry_after: float = 0.0
    """Seconds until the sender may send again (0 when allowed)."""
    notify: bool = False
    """Refused, and the sender has not been told in the last minute: tell them once."""


class SenderLimiter(Protocol):
    async def allow(self, key: str) -> Verdict:
        """Count one message of ``key`` (``channel:sender``) if the limit allows it."""


class MemorySenderLimiter:
    def __init__(
        self,
        per_minute: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_senders: int = MAX_TRACKED_SENDERS,
    ) -> None:
        self.interval = 60.0 / per_minute
        self.tolerance = self.interval * (burst - 1)
        self._clock = clock
        self._max_senders = max_senders
        self._tat: dict[str, float] = {}
        self._noticed: dict[str, float] = {}

    async def allow(self, key: str) -> Verdict:
        now = self._clock()
        tat = max(self._tat.get(key, now), now)
        if tat - now > self.tolerance:
            last = self._noticed.get(key)
            notify = last is None or now - last >= NOTICE_EVERY_SECONDS
            if notify:
                self._noticed[key] = now
            return Verdict(False, retry_after=tat - self.tolerance - now, notify=notify)
        self._tat[key] = tat + self.interval
        if len(self._tat) > self._max_senders:
            self._forget_idle(now)
        return Verdict(True)

    def _forget_idle(self, now: float) -> None:
        # A sender whose bucket is full again is indistinguishable from a new one.
        self._tat = {k: t for k, t in self._tat.items() if t > now}
        self._noticed = {k: t for k, t in self._noticed.items() if now - t < NOTICE_EVERY_SECONDS}


async def within_sender_limit(
    limiter: SenderLimiter | None, config: Config, msg: InboundMessage, channel: Channel
) -> bool:
    """Admins are exempt; everyone else gets ``bot.sender_rate_limit`` per channel. A sender
    over it is told so once (``bot.rate_limited_reply``) and the message is dropped."""
    if limiter is None or msg.sender_is_admin or configured_admin(config, msg, channel.name):
        return True
    verdict = await limiter.allow(f"{channel.name}:{msg.sender.id}")
    if verdict.allowed:
        return True
    log.warning(
        "inbound.rate_limited",
        channel=channel.name,
        chat=msg.chat.chat_id,
        sender=msg.sender.id,
        message_id=msg.message_id,
        retry_after=round(verdict.retry_after, 1),
    )
    if verdict.notify:
        reply_to = msg.message_id if msg.chat.chat_type is ChatType.GROUP else None
        try:
            await send_with_retry(
                channel, msg.chat, config.bot.rate_limited_reply, reply_to=reply_to
            )
        except Exception as exc:
            log.info("rate_limit.notice_failed", channel=channel.name, error=str(exc))
    return False
