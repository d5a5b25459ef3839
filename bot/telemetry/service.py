"""The service's telemetry: its :class:`~bot.telemetry.metrics.Metrics`, the trace store
wrapper that feeds them, and the OTLP export when ``tracing.otlp.endpoint`` is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core import TraceStore
from bot.config import TracingConfig
from bot.telemetry.metrics import Metrics
from bot.telemetry.observed_traces import ObservedTraces

if TYPE_CHECKING:
    from bot.telemetry.otlp import OtlpExport  # the OpenTelemetry SDK: only when configured


class Telemetry:
    def __init__(self, config: TracingConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.export: OtlpExport | None = None

    def start(self) -> None:
        """Open the OTLP export when it is configured (a background thread of the SDK)."""
        if self.config.otlp.endpoint and self.export is None:
            from bot.telemetry.otlp import OtlpExport

            self.export = OtlpExport(self.config)

    def traces(self, store: TraceStore) -> ObservedTraces:
        """``store`` as the agents should write to it: counted, and exported when on."""
        return ObservedTraces(store, self.metrics, self.export)

    @property
    def spans_exported(self) -> dict[str, int] | None:
        """Spans sent to the collector by outcome; None when the export is off."""
        return dict(self.export.counts) if self.export is not None else None

    async def aclose(self) -> None:
        if self.export is not None:
            export, self.export = self.export, None
            await export.aclose()
