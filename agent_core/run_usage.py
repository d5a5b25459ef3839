"""The loop's side of metering (``agent_core/usage.py``): the model's price for the prompt, a
call's reservation and its settlement, and the stop when a usage limit refuses one. Every helper
takes the loop's meter, None when nothing is metered (then it does nothing)."""

from __future__ import annotations

from typing import Protocol

import structlog

from agent_core.messages import Usage
from agent_core.providers.base import ModelRequest
from agent_core.run import RunRequest, RunStatus
from agent_core.run_state import Finish, RunState
from agent_core.tokens import TokenCounter
from agent_core.tracing import Span, Trace
from agent_core.uncancellable import finish_despite_cancel
from agent_core.usage import (
    DEFAULT_OUTPUT_ESTIMATE,
    LlmCall,
    Reservation,
    UsageLimitReached,
    UsageMeter,
)

log = structlog.get_logger(__name__)


async def price_note(meter: UsageMeter | None, provider: str, model: str) -> str:
    """The model's price in words, for the prompt's Runtime section ("" when unknown)."""
    return "" if meter is None else await meter.price_note(provider, model)


class TokenCounters(Protocol):
    """Where the loop's token counters are (``agent_core.context_budget.ContextBudget``)."""

    def deferred_counter(self, model: str | None = None) -> TokenCounter: ...

    async def counter(self, model: str | None = None) -> TokenCounter: ...


async def reserve_call(
    meter: UsageMeter | None,
    state: RunState,
    iteration: int,
    provider: str,
    model_request: ModelRequest,
    counters: TokenCounters,
) -> Reservation | None:
    """Hold the call's estimate; raises :class:`UsageLimitReached` when a limit refuses it.

    The request's input is estimated only when a limit applies to the run, and then as its
    ceiling (:meth:`TokenCounter.ceiling`, no tokenizer), with the exact count on demand: the
    meter asks for it only near a limit, where the ceiling could decide otherwise. Counting
    every call exactly cost a tokenizer (~27 MiB) and about 0.7 ms per reply.
    """
    if meter is None:
        return None
    call = estimated_call(
        meter,
        state.request,
        provider,
        model_request,
        counters,
        iteration=iteration,
        first_of_run=not state.metered,
    )
    return await meter.reserve(call)


def estimated_call(
    meter: UsageMeter,
    request: RunRequest,
    provider: str,
    model_request: ModelRequest,
    counters: TokenCounters,
    *,
    iteration: int,
    first_of_run: bool,
) -> LlmCall:
    """``model_request`` as the meter sees it: its input's ceiling when a limit applies to the
    run (see :func:`reserve_call`), else 0."""
    tokens, exact = 0, None
    if meter.needs_estimate(request):
        model, messages = model_request.model, model_request.messages
        tokens = counters.deferred_counter(model).ceiling(messages)

        async def exact_input() -> int:
            return (await counters.counter(model)).count(messages)

        exact = exact_input
    return LlmCall(
        request,
        provider,
        model_request.model,
        iteration,
        input_tokens=tokens,
        max_output_tokens=model_request.max_tokens or DEFAULT_OUTPUT_ESTIMATE,
        first_of_run=first_of_run,
        exact_input=exact,
    )


async def release_call(meter: UsageMeter | None, ticket: Reservation | None) -> None:
    """The failed call's estimate is released, even while the run is being cancelled."""
    if ticket is not None and meter is not None:
        await finish_despite_cancel(meter.settle(ticket, None), name="usage.release")


async def settle_call(
    meter: UsageMeter | None, ticket: Reservation | None, state: RunState, span: Span, usage: Usage
) -> None:
    """Record what the call used: the run counts as metered, its span gets the charge."""
    if ticket is not None and meter is not None:
        charge = await meter.settle(ticket, usage)
        state.metered = True
        span.attributes.update(charge.attributes())


def record_tokens(trace: Trace, usage: Usage) -> None:
    """The run's token totals on its trace."""
    trace.input_tokens, trace.output_tokens = usage.input_tokens, usage.output_tokens


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
