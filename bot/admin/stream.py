"""``GET /admin/api/events``: run events and the live-runs table as server-sent events.

Each browser tab gets its own bounded queue fed by the event bus; the bus never waits for a
slow tab (a full queue drops the event, and the next ``runs`` snapshot corrects the table).
Two kinds of messages: ``event: run`` (run started, tool call/result, completed, failed) and
``event: runs`` (the whole live-runs list, sent whenever it changed; a stopped run has no end
event, so the list is also compared once a second). A stream ends when the service drains (a
stream left open would hold up the shutdown) and after :data:`MAX_STREAM_SECONDS`; browsers
reconnect by themselves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import structlog
from starlette.responses import StreamingResponse

from agent_core import Event, EventType
from bot.admin.runs import RunTracker
from bot.app import Loopgate
from bot.redaction import redact_tree

log = structlog.get_logger(__name__)

FORWARDED = frozenset(
    {
        EventType.RUN_STARTED,
        EventType.ACTIVITY,
        EventType.TOOL_CALL,
        EventType.TOOL_RESULT,
        EventType.RUN_COMPLETED,
        EventType.RUN_FAILED,
    }
)
QUEUE_SIZE = 256
TICK_SECONDS = 1.0
HEARTBEAT_SECONDS = 15.0
MAX_STREAM_SECONDS = 600.0
PREVIEW_CHARS = 200  # tool arguments/results and answers are cut: the trace has them


def _message(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def _public(event: Event) -> dict[str, Any]:
    payload = {
        key: (value[:PREVIEW_CHARS] if isinstance(value, str) else value)
        for key, value in event.payload.items()
        if key in ("name", "id", "is_error", "phase", "iteration", "error", "content")
    }
    return redact_tree({**event.as_dict(), "payload": payload})  # type: ignore[no-any-return]


async def event_stream(loopgate: Loopgate, tracker: RunTracker) -> AsyncIterator[str]:
    """The stream of one tab; Starlette ends it when the tab disconnects."""
    queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_SIZE)

    async def on_event(event: Event) -> None:
        if event.type in FORWARDED and not queue.full():
            queue.put_nowait(event)

    unsubscribe = loopgate.events.subscribe(on_event)
    started = last_sent = time.monotonic()
    shown: list[dict[str, Any]] | None = None
    try:
        yield "retry: 2000\n\n"
        while not loopgate.draining and time.monotonic() - started < MAX_STREAM_SECONDS:
            try:
                event: Event | None = await asyncio.wait_for(queue.get(), TICK_SECONDS)
            except TimeoutError:
                event = None
            if event is not None:
                yield _message("run", _public(event))
                last_sent = time.monotonic()
            runs = tracker.runs()
            # Ages grow every second: compare without them, so an idle table sends nothing.
            current = [{k: v for k, v in r.items() if k != "age_s"} for r in runs]
            if current != shown:
                shown = current
                yield _message("runs", runs)
                last_sent = time.monotonic()
            elif time.monotonic() - last_sent > HEARTBEAT_SECONDS:
                yield ": keep-alive\n\n"  # proxies close idle connections
                last_sent = time.monotonic()
    finally:
        unsubscribe()


def events_response(loopgate: Loopgate, tracker: RunTracker) -> StreamingResponse:
    return StreamingResponse(
        event_stream(loopgate, tracker),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
