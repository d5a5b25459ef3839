"""The trace store the agents write to: the real store, then the trace's metrics and export.

A run hands its trace over once, when it ends (:class:`agent_core.TraceStore`); that one call
is where the service learns the run's duration, each model call's latency and tokens, and each
tool call's outcome, so nothing is counted on the loop's own path. Neither counting nor
exporting can fail the save or the run: an error there is logged and the trace is still
stored.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from agent_core import Trace, TraceStore
from bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


class SpanExport(Protocol):
    def export(self, trace: Trace) -> None:
        """Queue the trace's spans for sending; never blocks on the network."""


class ObservedTraces:
    """Implements :class:`agent_core.TraceStore` around ``store``."""

    def __init__(
        self, store: TraceStore, metrics: Metrics, export: SpanExport | None = None
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._export = export

    async def save_trace(self, trace: Trace) -> None:
        try:
            await self._store.save_trace(trace)
        finally:
            self._observe(trace)

    def _observe(self, trace: Trace) -> None:
        try:
            self._metrics.observe_trace(trace)
        except Exception:
            log.exception("metrics.observe_failed", trace_id=trace.id)
        if self._export is not None:
            try:
                self._export.export(trace)
            except Exception:
                log.exception("trace.export_failed", trace_id=trace.id)
