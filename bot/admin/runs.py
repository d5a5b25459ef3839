"""Live runs as the dashboard shows them, and stopping one from there.

The run registry knows which runs exist (the same one ``/stop`` uses); :class:`RunTracker`
adds what it does not keep, from the event bus: when each run started and which tool it is in.
A stop goes through the registry exactly as ``/stop`` does: the run's task is cancelled, and the
turn's own cleanup removes typing and reactions; the chat then gets ``bot.stop_reply``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from agent_core import Event, EventType
from bot.app import Loopgate
from bot.pipeline.delivery import send_with_retry
from bot.pipeline.run_registry import ActiveRun
from bot.pipeline.session_keys import chat_of

log = structlog.get_logger(__name__)

FORGET_AFTER = 60.0  # seconds an unregistered run's record is kept (its events may lag)


@dataclass
class _Seen:
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    phase: str = ""
    tools: dict[str, str] = field(default_factory=dict)  # call id -> tool name, running
    last_event: float = field(default_factory=time.monotonic)


class RunTracker:
    """Follows run events; call :meth:`close` to stop listening."""

    def __init__(self, loopgate: Loopgate) -> None:
        self.loopgate = loopgate
        self._seen: dict[str, _Seen] = {}
        self.close = loopgate.events.subscribe(self._on_event)

    async def _on_event(self, event: Event) -> None:
        if event.type is EventType.RUN_STARTED:
            self._forget_ended()
        seen = self._seen.setdefault(event.run_id, _Seen())
        seen.last_event = time.monotonic()
        if event.type is EventType.ACTIVITY:
            seen.phase = str(event.payload.get("phase", ""))
        elif event.type is EventType.TOOL_CALL:
            seen.tools[str(event.payload.get("id", ""))] = str(event.payload.get("name", ""))
        elif event.type is EventType.TOOL_RESULT:
            seen.tools.pop(str(event.payload.get("id", "")), None)
        elif event.type in (EventType.RUN_COMPLETED, EventType.RUN_FAILED):
            # Still registered while the answer is sent; forgotten once unregistered.
            seen.tools.clear()
            seen.phase = "delivering"

    def _forget_ended(self) -> None:
        # Runs end in the registry (a cancelled one publishes no end event): forget them once
        # it has let them go and their last events are surely in.
        active = set(self._registered())
        horizon = time.monotonic() - FORGET_AFTER
        for run_id in [r for r, s in self._seen.items() if r not in active]:
            if self._seen[run_id].last_event < horizon:
                del self._seen[run_id]

    def _registered(self) -> dict[str, ActiveRun]:
        return {run.run_id: run for run in self.loopgate.registry.all_runs()}

    def runs(self) -> list[dict[str, Any]]:
        """Every registered run, oldest first, as the runs page and ``GET /admin/api/runs``
        show it."""
        now = datetime.now(UTC)
        rows: list[dict[str, Any]] = []
        for run in self._registered().values():
            seen = self._seen.setdefault(run.run_id, _Seen())
            chat = chat_of(run.session_key)
            rows.append(
                {
                    "run_id": run.run_id,
                    "agent_id": run.agent_id,
                    "channel": chat.channel if chat else "",
                    "chat_type": chat.chat_type.value if chat else "",
                    "chat_id": chat.chat_id if chat else "",
                    "thread_id": chat.thread_id if chat else None,
                    "session_key": run.session_key,
                    "requester_id": run.requester_id,
                    "parent_run_id": run.parent_run_id,
                    "started_at": seen.started_at.isoformat(),
                    "age_s": round((now - seen.started_at).total_seconds(), 1),
                    "phase": seen.phase,
                    "current_tool": ", ".join(sorted(set(seen.tools.values()))) or None,
                }
            )
        rows.sort(key=lambda r: str(r["started_at"]))
        return rows

    async def stop(self, run_id: str, *, by: str) -> bool:
        """Cancel the run and its children as ``/stop`` does; False when it is not running."""
        run = self._registered().get(run_id)
        if run is None or not self.loopgate.gateway.stop.abort(run_id, run.session_key):
            return False
        log.info("admin.run_stopped", run_id=run_id, session_key=run.session_key, by=by)
        if run.parent_run_id is None:
            await self._tell_chat(run.session_key)
        return True

    async def _tell_chat(self, session_key: str) -> None:
        """The user learns why no answer comes, as after their own ``/stop``."""
        chat = chat_of(session_key)
        channel = self.loopgate.gateway.channels.get(chat.channel) if chat else None
        if chat is None or channel is None:
            return
        try:
            await send_with_retry(channel, chat, self.loopgate.config.bot.stop_reply)
        except Exception as exc:
            log.warning("admin.stop_reply_failed", session_key=session_key, error=str(exc))
