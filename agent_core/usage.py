"""Metering of model calls: what each call cost, and whether the next one may be made.

The loop knows tokens; prices, budgets and where usage is added up are the bot's business. So
the loop talks to a :class:`UsageMeter` around every model call:

1. :meth:`UsageMeter.reserve` before the call, with an estimate of what it may use (the
   request's counted input tokens plus its ``max_tokens``), which concurrent runs see, so
   that together they can't overshoot a limit; it raises :class:`UsageLimitReached` to refuse
   the call, and the run stops there (no call is made). The input comes as a ceiling counted
   without the tokenizer, with a way to count it exactly (:attr:`LlmCall.exact_input`) for
   the checks the ceiling could decide differently;
2. :meth:`UsageMeter.settle` after it, with the usage the provider reported (``None`` when the
   call failed: the reservation is only released), returning the call's :class:`Charge`,
   which goes on the call's span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from agent_core.errors import AgentError
from agent_core.messages import Usage
from agent_core.run import RunRequest

DEFAULT_OUTPUT_ESTIMATE = 4096
"""Output tokens a call is assumed to take when its request sets no ``max_tokens``."""


class UsageLimitReached(AgentError):
    """A usage limit or budget refuses the next model call.

    ``notice`` is the one message the user gets (it names the reset time); ``reason`` is the
    short form kept in the trace and the inbox (``usage.user_daily_tokens``...).
    """

    def __init__(self, reason: str, notice: str, resets_at: datetime) -> None:
        super().__init__(f"{reason} reached; resets at {resets_at.isoformat()}")
        self.reason = reason
        self.notice = notice
        self.resets_at = resets_at


@dataclass(frozen=True, slots=True)
class LlmCall:
    """A model call about to be made."""

    request: RunRequest
    provider: str
    model: str
    iteration: int
    input_tokens: int = 0
    """Counted input tokens of the request (0 when the meter needs no estimate); a ceiling of
    them when :attr:`exact_input` is set."""
    max_output_tokens: int = DEFAULT_OUTPUT_ESTIMATE
    first_of_run: bool = False
    """The run's first call: the run is counted once, with it."""
    exact_input: Callable[[], Awaitable[int]] | None = field(default=None, compare=False)
    """Set when :attr:`input_tokens` is a ceiling, a bound counted without the tokenizer
    (``agent_core/tokens.py``): counts the input exactly, loading the tokenizer. A meter calls
    it only when the ceiling could change its decision (near a limit)."""

    @property
    def estimated_tokens(self) -> int:
        return self.input_tokens + self.max_output_tokens


@dataclass(frozen=True, slots=True)
class Charge:
    """What one call cost: ``cost_usd`` None when the model's price is unknown (not 0)."""

    cost_usd: float | None = None
    price_source: str | None = None
    """Where the price came from: ``config`` or the price table and its version."""

    def attributes(self) -> dict[str, object]:
        """For the call's span."""
        return {"cost_usd": self.cost_usd, "price_source": self.price_source}


@dataclass(slots=True)
class Reservation:
    """A call's hold on the limits it is counted against, until :meth:`UsageMeter.settle`."""

    call: LlmCall
    held: object = None
    """The meter's own bookkeeping (which counters, how much)."""


class UsageMeter(Protocol):
    def needs_estimate(self, request: RunRequest) -> bool:
        """Whether a limit applies to ``request``'s calls, so they must be estimated (counting
        tokens costs CPU and a tokenizer: done only when it matters)."""

    async def reserve(self, call: LlmCall) -> Reservation:
        """Hold the call's estimate; raises :class:`UsageLimitReached` to refuse it."""

    async def settle(self, reservation: Reservation, usage: Usage | None) -> Charge:
        """Record what the call used (``None``: it failed) and release its estimate."""

    async def price_note(self, provider: str, model: str) -> str:
        """The model's price in words, for the prompt's Runtime section ("" when unknown)."""
