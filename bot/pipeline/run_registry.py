"""The active run registry behind /stop and /stopall.

Per-process state behind a small protocol, so a Redis-backed registry can replace it when
several processes share the work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from agent_core.orchestration import ChildRun
from channels import InboundMessage

log = structlog.get_logger(__name__)


class RunHandle(Protocol):
    """What stopping a run needs: its task, or a stand-in for a run in another process."""

    def cancel(self, msg: Any | None = None) -> bool: ...
    def cancelling(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ActiveRun:
    run_id: str
    agent_id: str
    session_key: str
    requester_id: str
    task: RunHandle = field(compare=False, repr=False)
    parent_run_id: str | None = None  # a child run (spawn, delegate, team task) of this run


class RunRegistry(Protocol):
    async def refresh(self) -> None:
        """Bring the view of other processes' runs up to date before a stop reads it."""

    def register(self, run: ActiveRun) -> None: ...
    def unregister(self, run_id: str) -> None: ...
    def runs_of(self, session_key: str) -> list[ActiveRun]: ...
    def all_runs(self) -> list[ActiveRun]: ...
    def abort(self, run_id: str, session_key: str) -> bool: ...
    def abort_session(self, session_key: str) -> int: ...
    @property
    def active_runs(self) -> int: ...
    def active_runs_by_agent(self) -> dict[str, int]: ...


class ChildRegistration:
    """Makes child runs (agent_core.orchestration) stoppable runs of the user's session: they
    are registered under the session at the top of their run tree, with their parent run, so
    ``/stop`` of the parent and ``/stopall`` reach them (``ChildObserver``)."""

    def __init__(self, registry: RunRegistry) -> None:
        self.registry = registry

    def child_started(self, child: ChildRun) -> None:
        assert child.task is not None
        self.registry.register(
            ActiveRun(
                child.run_id,
                child.agent_id,
                child.root_session_key,
                _requester(child),
                child.task,
                parent_run_id=child.parent.run_id,
            )
        )

    def child_finished(self, child: ChildRun) -> None:
        self.registry.unregister(child.run_id)


def _requester(child: ChildRun) -> str:
    """Who may stop the child: the sender of the message its run tree answers."""
    origin = child.parent.origin
    return origin.sender.id if isinstance(origin, InboundMessage) else child.parent.user_id


class LocalRunRegistry:
    def __init__(self) -> None:
        self._runs: dict[str, ActiveRun] = {}

    async def refresh(self) -> None:
        """Every run is here: nothing to bring up to date."""

    def register(self, run: ActiveRun) -> None:
        self._runs[run.run_id] = run

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def runs_of(self, session_key: str) -> list[ActiveRun]:
        """The session's runs whose parent is not running (a child of a finished run counts),
        oldest first: what ``/stop`` chooses from."""
        return [
            run
            for run in self._runs.values()
            if run.session_key == session_key and run.parent_run_id not in self._runs
        ]

    def all_runs(self) -> list[ActiveRun]:
        """Every registered run, children included (the dashboard's live runs)."""
        return list(self._runs.values())

    def abort(self, run_id: str, session_key: str) -> bool:
        """Cancel one run and its children at any depth, but only on behalf of the session
        that owns it."""
        run = self._runs.get(run_id)
        if run is None or run.session_key != session_key:
            return False
        log.info("run.abort", run_id=run_id, session_key=session_key)
        cancelled = run.task.cancel()
        for child in self._children_of(run_id):
            child.task.cancel()
        return cancelled

    def _children_of(self, run_id: str) -> list[ActiveRun]:
        found: list[ActiveRun] = []
        parents = {run_id}
        while parents:
            level = [r for r in self._runs.values() if r.parent_run_id in parents]
            found += level
            parents = {r.run_id for r in level}
        return found

    def abort_session(self, session_key: str) -> int:
        """Cancel every run of the session, children included."""
        runs = [run for run in self._runs.values() if run.session_key == session_key]
        cancelled = sum(1 for run in runs if run.task.cancel())
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
