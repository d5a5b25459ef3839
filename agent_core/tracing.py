"""One trace per run: a root agent span, one span per LLM call and per tool call.

Spans are collected in memory while the run lasts and handed to a
:class:`~agent_core.store.TraceStore` once at the end, so tracing never adds I/O to the loop.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_core.messages import Message

OUTPUT_PREVIEW_CHARS = 500
VERBOSE_INPUT_CHARS = 50_000


class SpanKind(enum.StrEnum):
    AGENT = "agent"
    LLM = "llm"
    TOOL = "tool"
    ASYNC_TOOL = "async_tool"  # spawn/delegate/team dispatch: a tool that starts other runs
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
    # A child or delegated run: the trace and the tool span of the parent run that started it.
    parent_trace_id: str | None = None
    parent_span_id: str | None = None

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


def new_trace(
    run_id: str,
    session_key: str,
    agent_id: str,
    *,
    parent_trace_id: str | None = None,
    parent_span_id: str | None = None,
    cron_job: str | None = None,
) -> Trace:
    """``cron_job``: a scheduled job's run; its root span says so (``run=cron``, the job id)."""
    trace = Trace(
        id=uuid.uuid4().hex,
        run_id=run_id,
        session_key=session_key,
        agent_id=agent_id,
        started_at=datetime.now(UTC),
        parent_trace_id=parent_trace_id,
        parent_span_id=parent_span_id,
    )
    marks = {} if cron_job is None else {"run": "cron", "cron_job": cron_job}
    trace.start_span(SpanKind.AGENT, agent_id, session_key=session_key, **marks)
    return trace


def tool_span_id(trace_id: str, call_id: str) -> str:
    """The id of a tool call's span, known before the call runs: a child run started by the
    call links to it (``Trace.parent_span_id``) while the span itself is recorded after."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"{trace_id}/{call_id}").hex


def arguments_digest(arguments: str) -> str:
    """A short hash of a tool call's arguments, kept on its span: equal digests in one run are
    the same call repeated (``bot/evolution`` counts them). Canonical JSON when the arguments
    parse, so key order and spacing don't hide a repeat."""
    try:
        text = json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except ValueError:
        text = arguments
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def verbose_input(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)[:VERBOSE_INPUT_CHARS]


def messages_as_json(messages: Sequence[Message]) -> str:
    """The LLM input as JSON for verbose traces, cut at :data:`VERBOSE_INPUT_CHARS`."""
    wire: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.images:  # the reference, never the bytes
            item["images"] = [image.note() for image in m.images]
        if m.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
            ]
        if m.tool_call_id:
            item["tool_call_id"] = m.tool_call_id
        wire.append(item)
    return verbose_input(wire)


def render_tree(trace: Trace, children: Mapping[str, Sequence[Trace]] | None = None) -> list[str]:
    """A trace as indented lines: the trace header, then its spans under their parents.

    ``children`` maps a span id to the traces of the runs that span started (spawn, delegate,
    team tasks: see ``Trace.parent_span_id``); each is rendered the same way, recursively,
    nested under that span, so one tree shows the work of every agent a run involved.
    """
    return _render(trace, children or {}, {trace.id})


def _render(trace: Trace, children: Mapping[str, Sequence[Trace]], seen: set[str]) -> list[str]:
    took = ""
    if trace.ended_at is not None:
        took = f" {(trace.ended_at - trace.started_at).total_seconds() * 1000:.0f}ms"
    header = (
        f"{trace.started_at:%Y-%m-%d %H:%M:%S} {trace.status}{took} "
        f"agent={trace.agent_id} session={trace.session_key} run={trace.run_id} "
        f"tokens={trace.input_tokens}/{trace.output_tokens}"
    )
    lines = [header]
    if trace.error:
        lines.append(f"  error: {trace.error}")
    spans_under: dict[str | None, list[Span]] = {}
    for span in trace.spans:
        spans_under.setdefault(span.parent_id, []).append(span)

    def walk(parent: str | None, depth: int) -> None:
        for span in spans_under.get(parent, []):
            lines.append("  " * depth + "└─ " + _describe(span))
            walk(span.id, depth + 1)
            for child in children.get(span.id, ()):
                if child.id in seen:  # a cycle in hand-edited data must not recurse forever
                    continue
                seen.add(child.id)
                indent = "  " * (depth + 1)
                first, *rest = _render(child, children, seen)
                lines.append(f"{indent}↳ {first}")
                lines.extend(f"{indent}  {line}" for line in rest)

    walk(None, 1)
    if trace.output_preview:
        preview = trace.output_preview.replace("\n", " ")
        lines.append(f"  output: {preview[:120]}{'…' if len(preview) > 120 else ''}")
    return lines


def _describe(span: Span) -> str:
    a = span.attributes
    text = f"{span.kind} {span.name} {span.duration_ms:.0f}ms"
    if span.kind is SpanKind.LLM:
        text += f" iter={a.get('iteration')} tokens={a.get('input_tokens', 0)}/"
        text += f"{a.get('output_tokens', 0)}"
        if a.get("cost_usd") is not None:
            text += f" ${a['cost_usd']:.6f}"
    if span.kind is SpanKind.AGENT and a.get("stop_reason"):
        text += f" ({a['stop_reason']})"
    if a.get("blocked"):
        text += " BLOCKED"
    if span.error:
        text += " ERROR" + (f": {a['error_message']}" if a.get("error_message") else "")
    return text
