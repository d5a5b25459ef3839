"""Retrying transient provider failures: 429, 5xx, timeouts.

Exponential backoff with full jitter (tenacity), except that a server's ``Retry-After`` wins:
the server knows better than our guess when it will accept the call again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from agent_core.errors import ProviderError, RateLimited
from agent_core.uncancellable import stop_if_cancelled

T = TypeVar("T")

MAX_ATTEMPTS = 3
MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = MAX_ATTEMPTS
    initial_wait: float = 1.0
    max_wait: float = 20.0


OnRetry = Callable[[int, int, BaseException], Awaitable[None]]
"""Called before each new attempt with (attempt about to run, max attempts, last error)."""


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.transient


async def call_with_retry(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, on_retry: OnRetry
) -> T:
    backoff = wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER)
        return backoff(state)

    async def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None:
            await on_retry(state.attempt_number + 1, policy.max_attempts, exc)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry_if_exception(_transient),
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        # A /stop that an await on the way swallowed (Python 3.11's wait_for, which redis-py
        # wraps around each send, returns a result that arrives with the cancellation) still
        # stops the run here, before the model is called, not after the whole answer.
        stop_if_cancelled()
        with attempt:
            return await call()
    raise AssertionError("unreachable")
