"""bot/telemetry/observed_traces.py: the store gets every trace, counted once, even when
counting or exporting fails."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from agent_core import MemoryStore, Trace
from agent_core.tracing import new_trace
from bot.telemetry.metrics import Metrics
from bot.telemetry.observed_traces import ObservedTraces


class RecordingExport:
    def __init__(self, *, fail: bool = False) -> None:
        self.traces: list[Trace] = []
        self.fail = fail

    def export(self, trace: Trace) -> None:
        if self.fail:
            raise RuntimeError("exporter bug")
        self.traces.append(trace)


class BrokenMetrics(Metrics):
    def observe_trace(self, trace: Trace) -> None:
        raise ValueError("metrics bug")


class FailingStore:
    async def save_trace(self, trace: Trace) -> None:
        raise ConnectionError("database is gone")


def finished() -> Trace:
    trace = new_trace("run", "s", "main")
    trace.finish("completed")
    return trace


async def test_a_trace_is_stored_counted_and_exported() -> None:
    store, metrics, export = MemoryStore(), Metrics(), RecordingExport()
    trace = finished()
    await ObservedTraces(store, metrics, export).save_trace(trace)
    assert store.traces == [trace] and export.traces == [trace]
    assert list(metrics.run_seconds.series) == [("main", "completed")]


async def test_a_failing_count_or_export_is_logged_and_the_trace_still_stored() -> None:
    store = MemoryStore()
    traces = ObservedTraces(store, BrokenMetrics(), RecordingExport(fail=True))
    trace = finished()
    with capture_logs() as logs:
        await traces.save_trace(trace)
    assert store.traces == [trace]
    events = {entry["event"] for entry in logs}
    assert {"metrics.observe_failed", "trace.export_failed"} <= events


async def test_a_trace_the_store_refused_is_still_counted_and_exported() -> None:
    metrics, export = Metrics(), RecordingExport()
    with pytest.raises(ConnectionError):
        await ObservedTraces(FailingStore(), metrics, export).save_trace(finished())
    assert metrics.run_seconds.series and export.traces
