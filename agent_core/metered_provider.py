"""A session's housekeeping calls metered like its runs' own (docs/usage.md).

Compaction's summaries and the memory flush's turns are model calls the operator pays for.
:func:`metered` wraps the loop's provider for one run's request: each call is reserved (a usage
limit may refuse it: the compaction or flush is then skipped, as when the model fails) and
settled with what it used, under that run's agent, channel and user. The run itself is not
counted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.providers.base import DeltaHandler, ModelRequest, ModelResponse, Provider
from agent_core.run import RunRequest
from agent_core.run_usage import TokenCounters, estimated_call
from agent_core.uncancellable import finish_despite_cancel
from agent_core.usage import UsageMeter


@dataclass(slots=True)
class MeteredProvider:
    """``inner``'s calls accounted to ``request``'s run."""

    inner: Provider
    meter: UsageMeter
    request: RunRequest
    counters: TokenCounters
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        call = estimated_call(
            self.meter,
            self.request,
            self.name,
            request,
            self.counters,
            iteration=0,
            first_of_run=False,
        )
        ticket = await self.meter.reserve(call)
        try:
            response = await self.inner.complete(request, on_delta)
        except BaseException:
            await finish_despite_cancel(self.meter.settle(ticket, None), name="usage.release")
            raise
        await self.meter.settle(ticket, response.usage)
        return response

    async def aclose(self) -> None:
        """Nothing of its own: the inner provider is the loop's, closed by its owner."""


def metered(
    provider: Provider,
    meter: UsageMeter | None,
    request: RunRequest | None,
    counters: TokenCounters,
) -> Provider:
    """``provider`` metered for ``request``'s run; itself when nothing is metered."""
    if meter is None or request is None:
        return provider
    return MeteredProvider(provider, meter, request, counters)
