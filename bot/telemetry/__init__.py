"""What operators watch from outside: metrics for ``GET /metrics`` and each run's spans sent to
an OpenTelemetry collector (docs/metrics.md).

:mod:`.metrics` counts (no library on the reply path), :mod:`.observed_traces` feeds it from
each finished run's trace, :mod:`.otlp` (imported only with ``tracing.otlp.endpoint`` set)
exports the same trace through the OpenTelemetry SDK, and :mod:`.service` holds them for the
service.
"""
