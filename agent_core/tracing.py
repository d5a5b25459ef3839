"""One trace per run: a root agent span, one span per LLM call and per tool call.

Spans are collected in memory while the run lasts and handed to a
:class:`~agent_core.store.TraceStore` once at the end, so tracing never adds I/O to the loop.
"""

from __future__ import annotations

import enum
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

OUTPUT_PREVIEW_CHARS = 500
VERBOSE_INPUT_CHARS = 50_000


class SpanKind(enum.StrEnum):
    AGENT = "agent"
    LLM = "llm"
    TOOL = "tool"
    EVENT = "event"  # e.g. compaction, memory flush


def verbose_enabled() -> bool:
    return os.environ.get("LOOPGATE_TRACE_VERBOSE", "") in {"1", "true", "yes"}


@dataclass(slots=True)
class Span:
    id: str
    kind: SpanKind
    name: str
    started_at: datetime
    parent_id: str | None = None
    duration_ms: float = 0.0
    error: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def end(self, *, error: bool = False, **attributes: Any) -> None:
        self.duration_ms = (time.perf_counter() - self._t0) * 1000
        self.error = self.error or error
        self.attributes.update(attributes)


@dataclass(slots=True)
class Trace:
    id: str
    run_id: str
    session_key: str
    agent_id: str
    started_at: datetime
    status: str = "running"
    ended_at: datetime | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    output_preview: str = ""
    spans: list[Span] = field(default_factory=list)

    @property
    def root(self) -> Span:
        return self.spans[0]

    def start_span(self, kind: SpanKind, name: str, **attributes: Any) -> Span:
        parent = self.spans[0].id if self.spans else None
        span = Span(
            id=uuid.uuid4().hex,
            kind=kind,
            name=name,
            started_at=datetime.now(UTC),
            parent_id=parent,
            attributes=dict(attributes),
        )
        self.spans.append(span)
        return span

    def finish(self, status: str, *, output: str = "", error: str | None = None) -> None:
        self.status = status
        self.ended_at = datetime.now(UTC)
        self.error = error
        self.output_preview = output[:OUTPUT_PREVIEW_CHARS]
        if self.spans:
            self.root.end(error=status in {"error", "failed"}, status=status)


def new_trace(run_id: str, session_key: str, agent_id: str) -> Trace:
    trace = Trace(
        id=uuid.uuid4().hex,
        run_id=run_id,
        session_key=session_key,
        agent_id=agent_id,
        started_at=datetime.now(UTC),
    )
    trace.start_span(SpanKind.AGENT, agent_id, session_key=session_key)
    return trace


def verbose_input(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)[:VERBOSE_INPUT_CHARS]
