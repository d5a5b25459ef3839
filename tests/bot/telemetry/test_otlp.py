"""bot/telemetry/otlp.py: a stored trace sent to a fake OTLP/HTTP collector on loopback, with
the stored ids and attributes; a collector that is down or hangs holds nothing up for longer
than ``tracing.otlp.timeout``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from structlog.testing import capture_logs

from agent_core import SpanKind, Trace
from agent_core.tracing import new_trace, tool_span_id
from bot.config import TracingConfig
from bot.redaction import register_secrets
from bot.telemetry.otlp import (
    OtlpExport,
    _CountedExporter,
    span_attributes,
    span_id_of,
    trace_id_of,
)
from tests.fakes.otlp_collector import FakeCollector
from tests.service_support import free_port

SECRET = "otlp-test-secret-value-42"


@pytest.fixture
async def collector() -> AsyncIterator[FakeCollector]:
    async with FakeCollector() as server:
        yield server


def tracing(endpoint: str, **otlp: Any) -> TracingConfig:
    return TracingConfig.model_validate({"otlp": {"endpoint": endpoint, **otlp}})


def a_run() -> Trace:
    """A finished run: a model call that asks for a tool, the tool (failed), a second call."""
    trace = new_trace("run-1", "agent:main:web:direct:u1", "main")
    first = trace.start_span(
        SpanKind.LLM, "openai/gpt-x", provider="openai", model="gpt-x", iteration=1
    )
    first.end(input_tokens=120, output_tokens=9, tool_calls=1)
    tool = trace.start_span(SpanKind.TOOL, "read_file", id="call_1")
    tool.id = tool_span_id(trace.id, "call_1")
    tool.started_at = first.started_at + timedelta(milliseconds=5)
    tool.duration_ms = 12.5
    tool.error = True
    tool.attributes.update(args_hash="abcd", error_message=f"no such file (key {SECRET})")
    second = trace.start_span(
        SpanKind.LLM, "openai/gpt-x", provider="openai", model="gpt-x", iteration=2
    )
    second.end(input_tokens=150, output_tokens=20, tool_calls=0)
    trace.input_tokens, trace.output_tokens = 270, 29
    trace.finish("completed", output="the answer")
    return trace


class TestIds:
    def test_the_trace_id_is_the_stored_one_and_span_ids_its_first_half(self) -> None:
        trace = a_run()
        assert f"{trace_id_of(trace.id):032x}" == trace.id
        for span in trace.spans:
            assert f"{span_id_of(span.id):016x}" == span.id[:16]

    def test_ids_of_another_shape_are_hashed_the_same_way_every_time(self) -> None:
        assert trace_id_of("not-hex") == trace_id_of("not-hex") != trace_id_of("other")
        assert span_id_of("0" * 32) == span_id_of("0" * 32) != 0
        assert span_id_of("short") < 2**64 and trace_id_of("short") < 2**128


class TestAttributes:
    def test_stored_attributes_kept_with_genai_names_and_values_otel_can_carry(self) -> None:
        register_secrets([SECRET])
        trace = a_run()
        llm, tool = trace.spans[1], trace.spans[2]
        llm.attributes["tags"] = ["a", "b"]
        llm.attributes["mixed"] = ["a", 1]
        llm.attributes["nested"] = {"k": SECRET}
        attributes = span_attributes(llm)
        assert attributes["model"] == "gpt-x" and attributes["input_tokens"] == 120
        assert attributes["gen_ai.request.model"] == "gpt-x"
        assert attributes["gen_ai.usage.output_tokens"] == 9
        assert attributes["loopgate.span_id"] == llm.id
        assert attributes["tags"] == ["a", "b"]
        assert attributes["mixed"] == '["a", 1]'
        assert attributes["nested"] == '{"k": "***"}'
        tool_attributes = span_attributes(tool)
        assert tool_attributes["error_message"] == "no such file (key ***)"
        assert tool_attributes["gen_ai.tool.name"] == "read_file"
        assert tool_attributes["gen_ai.tool.call.id"] == "call_1"
        root = span_attributes(trace.root, trace)
        assert root["loopgate.run_id"] == "run-1" and root["loopgate.status"] == "completed"
        assert root["loopgate.input_tokens"] == 270
        assert "loopgate.error" not in root  # None is left out


class TestExport:
    async def test_a_run_reaches_the_collector_with_its_stored_ids_and_attributes(
        self, collector: FakeCollector
    ) -> None:
        register_secrets([SECRET])
        config = tracing(collector.base_url, headers={"x-api-key": SECRET})
        config = config.model_copy(update={"service_name": "loopgate-test"})
        export = OtlpExport(config)
        trace = a_run()
        export.export(trace)
        await export.aclose()  # flushes
        assert len(collector.spans) == 4
        by_id = {span.span_id: span for span in collector.spans}
        root = by_id[trace.root.id[:16]]
        assert {span.trace_id for span in collector.spans} == {trace.id}
        assert root.parent_span_id == "" and root.name == "main"
        assert root.resource["service.name"] == "loopgate-test"
        assert root.scope == "loopgate"
        for stored in trace.spans[1:]:
            sent = by_id[stored.id[:16]]
            assert sent.parent_span_id == trace.root.id[:16]
            assert sent.name == stored.name
            assert sent.attributes["loopgate.span_id"] == stored.id
            for key, value in stored.attributes.items():
                expected = value.replace(SECRET, "***") if isinstance(value, str) else value
                assert sent.attributes[key] == expected, key
        llm = by_id[trace.spans[1].id[:16]]
        assert llm.kind == "SPAN_KIND_CLIENT" and llm.status_code == "STATUS_CODE_UNSET"
        tool = by_id[trace.spans[2].id[:16]]
        assert tool.status_code == "STATUS_CODE_ERROR"
        assert tool.status_message == "no such file (key ***)"
        started = trace.spans[2].started_at.timestamp()
        assert abs(tool.start_ns / 1e9 - started) < 1e-5
        assert tool.end_ns - tool.start_ns == 12_500_000
        assert collector.requests[0]["x-api-key"] == SECRET

    async def test_a_child_run_links_to_the_tool_span_that_started_it(
        self, collector: FakeCollector
    ) -> None:
        parent = a_run()
        started_by = parent.spans[2].id
        child = new_trace(
            "run-2", "agent:helper:web:direct:u1", "helper",
            parent_trace_id=parent.id, parent_span_id=started_by,
        )  # fmt: skip
        child.finish("completed", output="done")
        export = OtlpExport(tracing(collector.base_url))
        export.export(child)
        await export.aclose()
        (root,) = collector.spans
        assert root.trace_id == child.id
        assert root.links == [
            {
                "trace_id": parent.id,
                "span_id": started_by[:16],
                "attributes": {"loopgate.link": "started_by"},
            }
        ]
        assert root.attributes["loopgate.parent_span_id"] == started_by

    async def test_a_collector_error_is_counted_as_failed(self, collector: FakeCollector) -> None:
        collector.fail_next(400)  # not retried
        export = OtlpExport(tracing(collector.base_url))
        export.export(a_run())
        await export.aclose()
        assert export.counts == {"exported": 0, "failed": 4}
        assert not collector.spans


class ScriptedExporter(SpanExporter):
    def __init__(self, *results: SpanExportResult) -> None:
        self.results = list(results)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.results.pop(0)


def test_failing_and_recovering_are_logged_once_each_and_counted() -> None:
    ok, failed = SpanExportResult.SUCCESS, SpanExportResult.FAILURE
    exporter = _CountedExporter(ScriptedExporter(ok, failed, failed, ok, ok))
    with capture_logs() as logs:
        for size in (1, 2, 3, 4, 5):
            exporter.export([ReadableSpan(f"s{n}") for n in range(size)])
    assert [entry["event"] for entry in logs] == [
        "trace.export_failing",
        "trace.export_recovered",
    ]
    assert exporter.counts == {"exported": 10, "failed": 5}
    exporter.cut = True  # at shutdown, once the flush has had its time
    assert exporter.export([ReadableSpan("late")]) is failed
    assert exporter.counts["failed"] == 6


class TestCollectorTrouble:
    """The collector runs on this test's event loop: an export that waited for it from the
    loop would never return."""

    async def test_a_collector_that_is_down_holds_shutdown_up_for_the_timeout_at_most(
        self,
    ) -> None:
        export = OtlpExport(tracing(f"http://127.0.0.1:{free_port()}", timeout=1))
        for _ in range(50):
            export.export(a_run())
        closing = time.monotonic()
        await export.aclose()
        assert time.monotonic() - closing < 5.0  # 1 s, and no retry loop past it
        assert export.counts["exported"] == 0

    async def test_a_collector_that_hangs_neither_blocks_exports_nor_shutdown(
        self, collector: FakeCollector
    ) -> None:
        collector.hold = True
        export = OtlpExport(tracing(collector.base_url, timeout=1))
        export.export(a_run())
        await collector.wait_for(lambda: collector.held)  # the batch went out, unanswered
        export.export(a_run())  # still only queued
        closing = time.monotonic()
        await export.aclose()
        assert time.monotonic() - closing < 5.0
        assert not collector.spans and export.counts["exported"] == 0
