"""Starting a platform channel without letting a platform outage take the service down.

The first attempt runs inline, so a token or setting that can never work (``Forbidden``,
``BadRequest``) stops start-up with a clear error. Anything else (network down, 5xx, a timeout)
is retried in the background with backoff while the other channels and the web chat serve.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Coroutine
from typing import Any

import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_not_exception_type,
    wait_exponential_jitter,
)

from channels import BadRequest, Channel, Forbidden, InboundHandler

log = structlog.get_logger(__name__)

FATAL_START_ERRORS = (Forbidden, BadRequest)


class ChannelState(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    RETRYING = "retrying"
    FAILED = "failed"


class ChannelStarter:
    """Starts channels and remembers how each one is doing (``/healthz`` shows it)."""

    def __init__(self, *, initial_delay: float = 1.0, max_delay: float = 60.0) -> None:
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.states: dict[str, ChannelState] = {}
        self._up: dict[str, asyncio.Event] = {}

    def is_up(self, name: str) -> bool:
        return self.states.get(name) is ChannelState.UP

    async def wait_up(self, name: str) -> None:
        """Return once ``name`` is up (a replayed answer waits for its channel to be ready)."""
        if not self.is_up(name):
            await self._up.setdefault(name, asyncio.Event()).wait()

    def _set(self, name: str, state: ChannelState) -> None:
        self.states[name] = state
        if state is ChannelState.UP:
            self._up.setdefault(name, asyncio.Event()).set()

    async def start(
        self, channel: Channel, handler: InboundHandler
    ) -> Coroutine[Any, Any, None] | None:
        """Start ``channel``; on a transient failure return the retry loop to run in the
        background (the caller owns the task, so shutdown can cancel it)."""
        self._set(channel.name, ChannelState.STARTING)
        try:
            await channel.start(handler)
        except FATAL_START_ERRORS:
            self._set(channel.name, ChannelState.FAILED)
            raise
        except Exception as exc:
            self._set(channel.name, ChannelState.RETRYING)
            log.warning(
                "channel.start_failed",
                channel=channel.name,
                error=f"{type(exc).__name__}: {exc}",
                retry_in=self.initial_delay,
            )
            return self._retry(channel, handler)
        self._set(channel.name, ChannelState.UP)
        return None

    async def _retry(self, channel: Channel, handler: InboundHandler) -> None:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "channel.start_failed",
                channel=channel.name,
                attempt=state.attempt_number + 1,
                error=f"{type(exc).__name__}: {exc}",
                retry_in=round(state.upcoming_sleep, 2),
            )

        retrying = AsyncRetrying(
            wait=wait_exponential_jitter(
                multiplier=self.initial_delay, max=self.max_delay, jitter=self.initial_delay
            ),
            # Exception only: a CancelledError (shutdown) inside start() must end the loop.
            retry=retry_if_exception_type(Exception)
            & retry_if_not_exception_type(FATAL_START_ERRORS),
            before_sleep=before_sleep,
            reraise=True,
        )
        await asyncio.sleep(self.initial_delay)
        try:
            async for attempt in retrying:
                with attempt:
                    await channel.start(handler)
        except FATAL_START_ERRORS as exc:
            self._set(channel.name, ChannelState.FAILED)
            log.error("channel.start_gave_up", channel=channel.name, error=str(exc))
            return
        self._set(channel.name, ChannelState.UP)
        log.info("channel.started_after_retry", channel=channel.name)
