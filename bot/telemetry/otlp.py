"""Each run's spans sent to an OpenTelemetry collector over OTLP/HTTP (``tracing.otlp``).

Imported only when ``tracing.otlp.endpoint`` is set: the SDK stays out of every other process.

A finished run's stored trace is handed to the SDK's span processor as finished spans
(``ReadableSpan``), at its recorded times, with its stored attributes, under ids derived from
the stored ones (:func:`trace_id_of`, :func:`span_id_of`), so a trace seen in the collector's UI
is the one ``loopgate traces`` shows. The spans are built whole rather than replayed through a
tracer (start, set, end): the tracer's sampler, id generator, locks and per-value attribute
checks were most of the export's cost on the event loop (issue 33), and the attributes are
already values OTel accepts (:func:`span_attributes`). A run started by another run (spawn,
delegate) keeps its own trace and links to the tool span that started it.

Sending is the SDK's ``BatchSpanProcessor``: ending a span appends it to a bounded queue and a
background thread posts batches, so a collector that is down or slow costs a run nothing but
that append; when the queue is full the oldest spans are dropped. At shutdown the queue is
flushed for at most ``tracing.otlp.timeout`` seconds, then abandoned.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.util.types import AttributeValue

from agent_core import Span, SpanKind, Trace
from bot.config import TracingConfig
from bot.redaction import redact, redact_tree

log = structlog.get_logger(__name__)

SCOPE = "loopgate"
MAX_QUEUED_SPANS = 4096
"""Spans waiting for the collector; past this the oldest are dropped (a collector down for
long costs memory up to here, no more)."""
BATCH_DELAY_MS = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def trace_id_of(stored: str) -> int:
    """The OTel trace id of a stored trace: the same 32 hex digits (a uuid4), or for an id of
    another shape the first 128 bits of its SHA-256."""
    return _hex_id(stored, 32)


def span_id_of(stored: str) -> int:
    """The OTel span id of a stored span: the first 16 of its 32 hex digits (the stored id is
    kept whole in ``loopgate.span_id``), or for an id of another shape 64 bits of its
    SHA-256."""
    return _hex_id(stored, 16)


def _hex_id(stored: str, digits: int) -> int:
    if len(stored) >= digits:
        try:
            value = int(stored[:digits], 16)
        except ValueError:
            value = 0
        if value:
            return value
    digest = hashlib.sha256(stored.encode()).digest()
    return int.from_bytes(digest[: digits // 2], "big") or 1


class _CountedExporter(SpanExporter):
    """The OTLP exporter, counting what it sent and failed to send, and cut off at
    shutdown once the flush has taken its time."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.counts = {"exported": 0, "failed": 0}
        self.cut = False
        self._failing = False
        self._shut = threading.Lock()
        self._shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.cut:
            self.counts["failed"] += len(spans)
            return SpanExportResult.FAILURE
        result = self.inner.export(spans)
        ok = result is SpanExportResult.SUCCESS
        self.counts["exported" if ok else "failed"] += len(spans)
        if ok == self._failing:  # logged when it starts failing and when it recovers
            self._failing = not ok
            if ok:
                log.info("trace.export_recovered", spans=len(spans))
            else:
                log.warning("trace.export_failing", spans=len(spans), **self.counts)
        return result

    def shutdown(self) -> None:
        # Twice when the flush was cut short: by aclose, then by the processor it interrupted.
        with self._shut:
            if self._shut_down:
                return
            self._shut_down = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class OtlpExport:
    """Implements :class:`bot.telemetry.observed_traces.SpanExport`; :meth:`aclose` at
    shutdown."""

    def __init__(self, config: TracingConfig, *, exporter: SpanExporter | None = None) -> None:
        """``exporter``: instead of OTLP/HTTP to ``tracing.otlp.endpoint`` (tests)."""
        otlp = config.otlp
        self._timeout = otlp.timeout
        self._exporter = _CountedExporter(
            exporter
            or OTLPSpanExporter(
                endpoint=otlp.traces_url, headers=dict(otlp.headers), timeout=otlp.timeout
            )
        )
        self._resource = Resource.create(
            {
                "service.name": config.service_name,
                "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
            }
        )
        self._scope = InstrumentationScope(SCOPE)
        self._processor = BatchSpanProcessor(
            self._exporter,
            max_queue_size=MAX_QUEUED_SPANS,
            schedule_delay_millis=BATCH_DELAY_MS,
        )
        # The provider only owns the processor's shutdown (aclose); spans don't go through it.
        self._provider = TracerProvider(
            resource=self._resource,
            shutdown_on_exit=False,  # aclose flushes, within its bound
        )
        self._provider.add_span_processor(self._processor)
        log.info("trace.export_on", endpoint=redact(otlp.traces_url))

    @property
    def counts(self) -> Mapping[str, int]:
        """Spans ``exported`` and ``failed`` so far."""
        return self._exporter.counts

    def export(self, trace: Trace) -> None:
        trace_id = trace_id_of(trace.id)
        ids = {span.id: span_id_of(span.id) for span in trace.spans}
        links: list[Link] = []
        if trace.parent_trace_id and trace.parent_span_id:
            started_by = SpanContext(
                trace_id_of(trace.parent_trace_id),
                span_id_of(trace.parent_span_id),
                is_remote=False,
                trace_flags=_SAMPLED,
            )
            links.append(Link(started_by, {"loopgate.link": "started_by"}))
        for position, span in enumerate(trace.spans):
            root = position == 0
            parent = ids.get(span.parent_id) if span.parent_id else None
            status = Status(StatusCode.UNSET)
            if span.error:
                reason = span.attributes.get("error_message") or (trace.error if root else None)
                status = Status(StatusCode.ERROR, redact(str(reason)) if reason else None)
            start = _nanoseconds(span.started_at)
            self._processor.on_end(
                ReadableSpan(
                    redact(span.name),
                    context=SpanContext(
                        trace_id, ids[span.id], is_remote=False, trace_flags=_SAMPLED
                    ),
                    parent=None
                    if parent is None
                    else SpanContext(trace_id, parent, is_remote=False, trace_flags=_SAMPLED),
                    resource=self._resource,
                    attributes=span_attributes(span, trace if root else None),
                    links=links if root else (),
                    kind=OtelKind.CLIENT if span.kind is SpanKind.LLM else OtelKind.INTERNAL,
                    status=status,
                    start_time=start,
                    end_time=start + int(span.duration_ms * 1_000_000),
                    instrumentation_scope=self._scope,
                )
            )

    async def aclose(self) -> None:
        """Send what is queued, for at most ``tracing.otlp.timeout`` seconds."""
        done = threading.Event()

        def shut_down() -> None:
            try:
                self._provider.shutdown()
            finally:
                done.set()

        # A thread of its own (a daemon): a collector that hangs must not hold the process
        # at exit, as a thread of the loop's executor would.
        threading.Thread(target=shut_down, name="otlp-shutdown", daemon=True).start()
        if not await asyncio.to_thread(done.wait, self._timeout):
            self._exporter.cut = True
            self._exporter.shutdown()  # ends the exporter's retry back-off
            log.warning("trace.export_abandoned", timeout_s=self._timeout, **self.counts)


def span_attributes(span: Span, trace: Trace | None = None) -> dict[str, AttributeValue]:
    """The stored span's attributes (secrets masked as in storage; values OTel can't carry as
    JSON text), its kind and stored id, GenAI names for model and tool calls, and for the root
    (``trace`` given) the trace's own fields."""
    attributes: dict[str, AttributeValue] = {
        "loopgate.span_kind": str(span.kind),
        "loopgate.span_id": span.id,
    }
    for key, value in span.attributes.items():
        converted = _value(value)
        if converted is not None:
            attributes[key] = converted
    a = span.attributes
    if span.kind is SpanKind.LLM:
        attributes["gen_ai.operation.name"] = "chat"
        _copy(attributes, a, "provider", "gen_ai.provider.name")
        _copy(attributes, a, "model", "gen_ai.request.model")
        _copy(attributes, a, "input_tokens", "gen_ai.usage.input_tokens")
        _copy(attributes, a, "output_tokens", "gen_ai.usage.output_tokens")
    elif span.kind in (SpanKind.TOOL, SpanKind.ASYNC_TOOL):
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = span.name
        _copy(attributes, a, "id", "gen_ai.tool.call.id")
    if trace is not None:
        attributes["gen_ai.operation.name"] = "invoke_agent"
        attributes["gen_ai.agent.name"] = trace.agent_id
        fields: dict[str, Any] = {
            "loopgate.trace_id": trace.id,
            "loopgate.run_id": trace.run_id,
            "loopgate.agent_id": trace.agent_id,
            "loopgate.session_key": trace.session_key,
            "loopgate.status": trace.status,
            "loopgate.input_tokens": trace.input_tokens,
            "loopgate.output_tokens": trace.output_tokens,
            "loopgate.error": trace.error,
            "loopgate.output_preview": trace.output_preview or None,
            "loopgate.parent_trace_id": trace.parent_trace_id,
            "loopgate.parent_span_id": trace.parent_span_id,
        }
        for key, value in fields.items():
            converted = _value(value)
            if converted is not None:
                attributes[key] = converted
    return attributes


def _copy(
    attributes: dict[str, AttributeValue], source: Mapping[str, Any], key: str, to: str
) -> None:
    converted = _value(source.get(key))
    if converted is not None:
        attributes[to] = converted


def _value(value: Any) -> AttributeValue | None:
    """An attribute value OTel accepts: a scalar, a list of one scalar type, else JSON text."""
    if value is None:
        return None
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple) and value:
        kinds = {type(item) for item in value}
        if kinds == {str}:
            return [redact(item) for item in value]
        if len(kinds) == 1 and kinds <= {bool, int, float}:
            return list(value)
    return json.dumps(redact_tree(value), ensure_ascii=False, default=str)


def _nanoseconds(moment: datetime) -> int:
    if moment.tzinfo is None:  # stored times are UTC; a naive one is read as such
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
