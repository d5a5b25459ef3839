"""Typing keep-alive: shown at once, refreshed while a run lasts, always stopped.

Platforms expire a typing indicator after a few seconds, so it is re-sent every ``interval``.
A TTL bounds it in case a run hangs. Once stopped it never restarts: a late refresh after the
answer was sent would show "typing…" under the answer.
"""

from __future__ import annotations

import asyncio

import structlog

from agent_core import cancel_and_wait
from channels import Channel, ChatRef

log = structlog.get_logger(__name__)


class TypingIndicator:
    def __init__(
        self, channel: Channel, chat: ChatRef, *, interval: float = 4.0, ttl: float = 120.0
    ) -> None:
        self.channel = channel
        self.chat = chat
        self.interval = interval
        self.ttl = ttl
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def active(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._stopped or self._task is not None or not self.channel.capabilities.typing:
            return
        self._task = asyncio.create_task(self._keep_alive(), name=f"typing:{self.chat.chat_id}")

    async def _keep_alive(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ttl
        while not self._stopped and loop.time() < deadline:
            try:
                await self.channel.set_typing(self.chat)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A typing failure must never fail the run; the answer matters, not the dots.
                log.info("typing.failed", channel=self.channel.name, error=str(exc))
            await asyncio.sleep(min(self.interval, max(0.0, deadline - loop.time())))
        if not self._stopped:
            log.info("typing.ttl_expired", channel=self.channel.name, ttl=self.ttl)

    async def stop(self) -> None:
        """Idempotent; safe to call from ``finally`` and before the first message is sent."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            # A /stop of the run arriving meanwhile must stop it (not suppress(CancelledError)).
            await cancel_and_wait(task)
