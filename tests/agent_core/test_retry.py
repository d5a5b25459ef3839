"""call_with_retry: transient provider errors are retried, others are not."""

from __future__ import annotations

import asyncio

import pytest

from agent_core.errors import (
    ConfigError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from agent_core.retry import RetryPolicy, call_with_retry

FAST = RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.01)


class Script:
    """A call that raises the scripted errors in turn, then returns ``value``."""

    def __init__(self, *errors: BaseException, value: str = "ok") -> None:
        self.errors = list(errors)
        self.value = value
        self.calls = 0
        self.retries: list[tuple[int, int, BaseException]] = []

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.value

    async def on_retry(self, attempt: int, max_attempts: int, error: BaseException) -> None:
        self.retries.append((attempt, max_attempts, error))


async def test_success_needs_no_retry() -> None:
    script = Script()
    assert await call_with_retry(script, FAST, script.on_retry) == "ok"
    assert script.calls == 1 and script.retries == []


async def test_transient_errors_are_retried_until_success() -> None:
    first, second = ProviderUnavailable("502"), ProviderTimeout("read timeout")
    script = Script(first, second, value="done")
    assert await call_with_retry(script, FAST, script.on_retry) == "done"
    assert script.calls == 3
    assert script.retries == [(2, 3, first), (3, 3, second)]


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    errors = [ProviderUnavailable(f"503 #{i}") for i in range(5)]
    script = Script(*errors)
    with pytest.raises(ProviderUnavailable) as caught:
        await call_with_retry(script, FAST, script.on_retry)
    assert caught.value is errors[2]
    assert script.calls == 3
    assert [attempt for attempt, _, _ in script.retries] == [2, 3]


async def test_max_attempts_one_means_no_retry() -> None:
    script = Script(ProviderUnavailable("503"))
    with pytest.raises(ProviderUnavailable):
        await call_with_retry(script, RetryPolicy(max_attempts=1), script.on_retry)
    assert script.calls == 1 and script.retries == []


@pytest.mark.parametrize(
    "error",
    [ProviderError("400 bad request", status_code=400), ConfigError("no key"), ValueError("x")],
)
async def test_permanent_errors_are_not_retried(error: Exception) -> None:
    script = Script(error)
    with pytest.raises(type(error)) as caught:
        await call_with_retry(script, FAST, script.on_retry)
    assert caught.value is error
    assert script.calls == 1 and script.retries == []


async def test_retry_after_wins_over_the_backoff() -> None:
    # The backoff alone would wait up to 30 s; the server's Retry-After of 0 s is used instead.
    slow = RetryPolicy(max_attempts=2, initial_wait=30.0, max_wait=30.0)
    script = Script(RateLimited("429", retry_after=0.0))
    async with asyncio.timeout(5):
        assert await call_with_retry(script, slow, script.on_retry) == "ok"
    assert script.calls == 2
    assert isinstance(script.retries[0][2], RateLimited)
