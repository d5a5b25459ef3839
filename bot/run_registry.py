"""The active run registry behind /stop and /stopall.

Per-process state behind a small protocol, so a Redis-backed registry can replace it when
several processes share the work.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ActiveRun:
    run_id: str
    agent_id: str
    session_key: str
    requester_id: str
    task: asyncio.Task[object] = field(compare=False, repr=False)


class RunRegistry(Protocol):
    def register(self, run: ActiveRun) -> None: ...
    def unregister(self, run_id: str) -> None: ...
    def runs_of(self, session_key: str) -> list[ActiveRun]: ...
    def abort(self, run_id: str, session_key: str) -> bool: ...
    def abort_session(self, session_key: str) -> int: ...
    @property
    def active_runs(self) -> int: ...
    def active_runs_by_agent(self) -> dict[str, int]: ...


class LocalRunRegistry:
    def __init__(self) -> None:
        self._runs: dict[str, ActiveRun] = {}

    def register(self, run: ActiveRun) -> None:
        self._runs[run.run_id] = run

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def runs_of(self, session_key: str) -> list[ActiveRun]:
        """The session's runs, oldest first."""
        return [run for run in self._runs.values() if run.session_key == session_key]

    def abort(self, run_id: str, session_key: str) -> bool:
        """Cancel one run, but only on behalf of the session that owns it."""
        run = self._runs.get(run_id)
        if run is None or run.session_key != session_key:
            return False
        log.info("run.abort", run_id=run_id, session_key=session_key)
        return run.task.cancel()

    def abort_session(self, session_key: str) -> int:
        cancelled = sum(1 for run in self.runs_of(session_key) if run.task.cancel())
        if cancelled:
            log.info("run.abort_session", session_key=session_key, cancelled=cancelled)
        return cancelled

    @property
    def active_runs(self) -> int:
        """The ``activeRuns`` counter: runs registered and not finished, in this process."""
        return len(self._runs)

    def active_runs_by_agent(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self._runs.values():
            counts[run.agent_id] = counts.get(run.agent_id, 0) + 1
        return counts
