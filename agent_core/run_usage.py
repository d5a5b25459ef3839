"""The loop's side of metering (``agent_core/usage.py``): a call's reservation, and the stop
when a usage limit refuses one."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import structlog

from agent_core.providers.base import ModelRequest
from agent_core.run import RunStatus
from agent_core.run_state import Finish, RunState
from agent_core.tokens import TokenCounter
from agent_core.usage import (
    DEFAULT_OUTPUT_ESTIMATE,
    LlmCall,
    Reservation,
    UsageLimitReached,
    UsageMeter,
)

log = structlog.get_logger(__name__)


async def reserve_call(
    meter: UsageMeter,
    state: RunState,
    iteration: int,
    provider: str,
    model_request: ModelRequest,
    counter: Callable[[str], Awaitable[TokenCounter]],
    deferred: Callable[[str], TokenCounter] | None = None,
) -> Reservation:
    """Hold the call's estimate; raises :class:`UsageLimitReached` when a limit refuses it.

    The request's input is counted only when a limit applies to the run: counting loads a
    tokenizer (~27 MiB resident, more while it loads), which most runs never need
    (``agent_core/tokens.py``). While ``deferred(model)`` has not loaded it, the call is first
    held at the count's ceiling, computed without it and never below the exact count: a limit
    that admits the ceiling admits the exact count too, so the answer is the same. Only a
    refusal is judged again by the exact count (loading the tokenizer). The price of skipping
    it: until the call settles, its hold is the ceiling, so a concurrent call of the same scope
    near its limit may be refused sooner than with the exact hold.
    """

    def call(tokens: int) -> LlmCall:
        return LlmCall(
            state.request,
            provider,
            model_request.model,
            iteration,
            input_tokens=tokens,
            max_output_tokens=model_request.max_tokens or DEFAULT_OUTPUT_ESTIMATE,
            first_of_run=not state.metered,
        )

    if not meter.needs_estimate(state.request):
        return await meter.reserve(call(0))
    if deferred is not None:
        unloaded = deferred(model_request.model)
        if not unloaded.loaded:
            with contextlib.suppress(UsageLimitReached):  # judged by the exact count below
                return await meter.reserve(call(unloaded.ceiling(model_request.messages)))
    tokens = (await counter(model_request.model)).count(model_request.messages)
    return await meter.reserve(call(tokens))


def usage_stop(state: RunState, exc: UsageLimitReached) -> Finish:
    """A limit refused the next call: the run stops here and the user gets the notice; the
    trace says which limit and when it resets."""
    log.warning(
        "run.usage_limit",
        run_id=state.request.run_id,
        reason=exc.reason,
        resets_at=exc.resets_at.isoformat(),
    )
    state.stop_reason = f"usage_limit: {exc.reason}"
    state.trace.root.attributes["stop_reason"] = state.stop_reason
    state.trace.root.attributes["usage_resets_at"] = exc.resets_at.isoformat()
    return Finish(exc.notice, RunStatus.USAGE_LIMIT)
