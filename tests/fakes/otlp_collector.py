"""A fake OpenTelemetry collector: OTLP/HTTP ``POST /v1/traces`` on 127.0.0.1.

It decodes each request's protobuf body (``ExportTraceServiceRequest``, with the
``opentelemetry-proto`` classes the real collector's wire format is defined by) and records
every span with its resource, so tests check what a collector would have stored::

    async with FakeCollector() as collector:
        ... export to collector.base_url ...
        await collector.wait_for(lambda: collector.spans)

It can be scripted to answer with an error status (:meth:`fail_next`) or to hold its answers
until released or stopped (:attr:`hold`): a collector that is down, overloaded or hanging.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.server import FakeServer

__all__ = ["CollectedSpan", "FakeCollector"]

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class CollectedSpan:
    """One span as the collector received it; ids as hex, attributes as plain values."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: str
    status_message: str
    attributes: dict[str, Any]
    links: list[dict[str, Any]]
    resource: dict[str, Any]
    scope: str


class FakeCollector(FakeServer):
    name = "FakeCollector"

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[CollectedSpan] = []
        self.requests: list[dict[str, str]] = []  # each request's headers
        self.hold = False
        """While True, requests are received (counted in :attr:`held`) but not answered."""
        self.held = 0
        self._release = asyncio.Event()
        self._failures: list[int] = []

    def fail_next(self, status: int, times: int = 1) -> None:
        self._failures += [status] * times

    def release(self) -> None:
        """Answer the held requests (and those that come later)."""
        self.hold = False
        self._release.set()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])

    def timeout_detail(self) -> str:
        return f"{len(self.requests)} requests, spans {[s.name for s in self.spans]}"

    async def before_stop(self) -> None:
        self._release.set()

    async def _traces(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(dict(request.headers))
        if self.hold:
            self.held += 1
            self.changed()
            await self._release.wait()
            if self.closing.is_set():
                return Response(status_code=503)
        if self._failures:
            status = self._failures.pop(0)
            self.changed()
            return Response(status_code=status)
        if request.headers.get("content-type") != PROTOBUF:
            return Response("expected protobuf", status_code=415)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        self.spans += _spans_of(message)
        self.changed()
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)

    def by_name(self, name: str) -> list[CollectedSpan]:
        return [s for s in self.spans if s.name == name]


def _spans_of(message: ExportTraceServiceRequest) -> list[CollectedSpan]:
    found = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    CollectedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.SpanKind.Name(span.kind),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status_code=span.status.StatusCode.Name(span.status.code),
                        status_message=span.status.message,
                        attributes=_attributes(span.attributes),
                        links=[
                            {
                                "trace_id": link.trace_id.hex(),
                                "span_id": link.span_id.hex(),
                                "attributes": _attributes(link.attributes),
                            }
                            for link in span.links
                        ],
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _any_value(pair.value) for pair in pairs}


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return MessageToDict(value.kvlist_value)
    if kind == "int_value":
        return int(value.int_value)
    return getattr(value, kind) if kind else None
