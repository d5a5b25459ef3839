"""Run events and the one subscriber API that the WebSocket, channels and tests use.

Event names and payload fields follow the agent-loop spec's event table.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class EventType(enum.StrEnum):
    RUN_STARTED = "run.started"
    ACTIVITY = "activity"  # {"phase": thinking|tool_exec|compacting, "iteration": N}
    CHUNK = "chunk"
    THINKING = "thinking"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    BLOCK_REPLY = "block.reply"  # assistant text written between tool iterations
    RUN_RETRYING = "run.retrying"
    CHILD_STARTED = "child.started"  # {agent, task_id, kind, background, active_children}
    CHILD_COMPLETED = "child.completed"  # the same, with status
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    run_id: str
    session_key: str
    payload: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": str(self.type),
            "run_id": self.run_id,
            "session_key": self.session_key,
            "payload": self.payload,
        }


Subscriber = Callable[[Event], Awaitable[None]]


class EventBus:
    """Fan-out of run events. A failing subscriber is logged and never breaks the run."""

    def __init__(self) -> None:
        self._all: list[Subscriber] = []
        self._by_session: dict[str, list[Subscriber]] = {}

    def subscribe(
        self, subscriber: Subscriber, *, session_key: str | None = None
    ) -> Callable[[], None]:
        """Receive every event, or only those of one session. Returns the unsubscribe function."""
        bucket = self._all if session_key is None else self._by_session.setdefault(session_key, [])
        bucket.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in bucket:
                bucket.remove(subscriber)
            if session_key is not None and not bucket:
                self._by_session.pop(session_key, None)

        return unsubscribe

    async def publish(self, event: Event) -> None:
        targets = [*self._all, *self._by_session.get(event.session_key, ())]
        for subscriber in targets:
            try:
                await subscriber(event)
            except Exception:
                log.exception("events.subscriber_failed", event_type=str(event.type))
