"""Child runs: what ``spawn``, ``delegate`` and a dispatched team task have in common.

A child is a run of some agent's :class:`~agent_core.Loop` in its own asyncio task, started from
a tool call of a parent run:

- **waited for** (``wait`` true): the tool awaits the child's task and returns its answer. A
  cancelled parent cancels the awaited task with it, so nothing keeps running.
- **in the background** (``wait`` false, user runs only): the tool returns a task id at once;
  when the child ends, its result is *announced*: the bot turns it into a new turn of the
  parent's session, delivered like any answer.

Limits (tool errors the model can read): the depth of the run tree (``max_spawn_depth``), the
children one run may start (``max_children_per_run``), a child's time (``child_timeout``), and
children of one batch running at once (``max_parallel_children``, in tool_exec). The parent's
event stream gets ``child.started`` / ``child.completed``; the bot's run registry learns of each
child through :class:`ChildObserver`, so ``/stop`` and ``/stopall`` reach them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from agent_core.errors import ToolError
from agent_core.events import Event, EventBus, EventType
from agent_core.run import RunRequest, RunResult, RunStatus
from agent_core.settings import AgentSettings
from agent_core.tools.base import ToolContext
from agent_core.tracing import tool_span_id

if TYPE_CHECKING:
    from agent_core.loop import Loop

log = structlog.get_logger(__name__)

_COUNTED_RUNS = 10_000  # parent runs whose child count is remembered (oldest forgotten)


@dataclass(eq=False)
class ChildRun:
    """One child run and where it belongs in the run tree."""

    task_id: str
    kind: str  # "spawn" | "delegate" | "team_task"
    agent_id: str
    parent: RunRequest
    request: RunRequest
    root_session_key: str  # the user's session at the top of the tree
    background: bool
    status: str = "running"
    task: asyncio.Task[RunResult] | None = field(default=None, repr=False)

    @property
    def run_id(self) -> str:
        return self.request.run_id


@dataclass(frozen=True, slots=True)
class Announcement:
    """A background child's end, to be said in the parent's session."""

    child: ChildRun
    result: RunResult

    @property
    def text(self) -> str:
        c = self.child
        what = {"spawn": "Sub-agent", "delegate": f"Delegated agent {c.agent_id}"}.get(
            c.kind, f"Team member {c.agent_id}"
        )
        if self.result.status is RunStatus.FAILED:
            body = f"failed: {self.result.error or 'unknown error'}"
        else:
            body = f"finished:\n\n{self.result.content}"
        return (
            f"[Background task {c.task_id}] {what} {body}\n\n"
            "Tell the user what came of it, or reply NO_REPLY if they need nothing."
        )


Announcer = Callable[[Announcement], Awaitable[None]]
LoopResolver = Callable[[str], Awaitable["Loop"]]


class ChildObserver(Protocol):
    """The bot's run registry: children are stoppable runs of their root session."""

    def child_started(self, child: ChildRun) -> None: ...

    def child_finished(self, child: ChildRun) -> None: ...


class Orchestrator:
    """Starts, limits, tracks and cancels child runs. One per service."""

    def __init__(
        self,
        resolve: LoopResolver,
        events: EventBus,
        *,
        announce: Announcer | None = None,
        observer: ChildObserver | None = None,
    ) -> None:
        self.resolve = resolve
        self.events = events
        self.announce = announce
        self.observer = observer
        self.children: dict[str, ChildRun] = {}  # run id → child still running
        self._started: OrderedDict[str, int] = OrderedDict()  # parent run id → children
        self._background: set[asyncio.Task[None]] = set()

    # -- limits ---------------------------------------------------------------------------

    def check_limits(self, ctx: ToolContext, settings: AgentSettings, tool: str) -> RunRequest:
        """The calling run, when it may start one more child; else a ToolError."""
        parent = ctx.request
        if parent is None:
            raise ToolError(tool, "not available outside an agent run")
        if parent.depth >= settings.max_spawn_depth:
            raise ToolError(
                tool,
                f"depth limit reached: this run is at depth {parent.depth} and runs may nest "
                f"only {settings.max_spawn_depth} deep. Do this part of the work yourself.",
            )
        started = self._started.get(parent.run_id, 0)
        if started >= settings.max_children_per_run:
            raise ToolError(
                tool,
                f"child limit reached: this run already started {started} child runs (at most "
                f"{settings.max_children_per_run} per run). Use the results you have.",
            )
        self._started[parent.run_id] = started + 1
        self._started.move_to_end(parent.run_id)
        while len(self._started) > _COUNTED_RUNS:
            self._started.popitem(last=False)
        return parent

    # -- running ---------------------------------------------------------------------------

    def child_request(
        self,
        ctx: ToolContext,
        parent: RunRequest,
        *,
        kind: str,
        task_id: str,
        agent_id: str,
        message: str,
        **overrides: object,
    ) -> RunRequest:
        """The child's RunRequest: the parent's user and chat, one level deeper, linked to the
        parent's trace and to the tool span of this call."""
        base = RunRequest(
            session_key=f"{parent.session_key}/{kind}/{task_id}",
            message=message,
            user_id=parent.user_id,
            agent_id=agent_id,
            channel=parent.channel,
            chat_type=parent.chat_type,
            sender_name=parent.sender_name,
            stream=False,
            chat_id=parent.chat_id,
            depth=parent.depth + 1,
            parent_run_id=parent.run_id,
            parent_trace_id=ctx.trace_id or None,
            parent_span_id=tool_span_id(ctx.trace_id, ctx.call_id) if ctx.trace_id else None,
            minimal_prompt=True,
            origin=parent.origin,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]

    async def start(
        self,
        loop: Loop,
        parent: RunRequest,
        request: RunRequest,
        *,
        kind: str,
        task_id: str,
        wait: bool,
        on_end: Callable[[RunResult], Awaitable[RunResult]] | None = None,
    ) -> tuple[ChildRun, RunResult | None]:
        """Start the child; returns it and, when waited for, its result (else None).

        ``on_end`` sees the result before anyone else (a team task records it) and may
        replace it. Background children are refused below the top run, whose session is a
        chat the result can be announced in.
        """
        if not wait and (parent.depth > 0 or self.announce is None):
            wait = True  # nowhere to announce a background result: wait for it instead
        parent_child = self.children.get(parent.run_id)
        child = ChildRun(
            task_id=task_id,
            kind=kind,
            agent_id=loop.settings.id,
            parent=parent,
            request=request,
            root_session_key=parent_child.root_session_key if parent_child else parent.session_key,
            background=not wait,
        )
        child.task = asyncio.create_task(
            self._run(loop, child, on_end), name=f"child:{kind}:{task_id}"
        )
        self.children[child.run_id] = child
        if self.observer is not None:
            self.observer.child_started(child)
        await self._emit(child, EventType.CHILD_STARTED)
        if wait:
            try:
                return child, await child.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the parent itself is cancelled (and took the child with it)
                # Only the child was stopped (/stop named it): the parent goes on.
                return child, RunResult(child.run_id, RunStatus.CANCELLED)
        announcer = asyncio.create_task(self._announce_when_done(child))
        self._background.add(announcer)
        announcer.add_done_callback(self._background.discard)
        return child, None

    async def _run(
        self,
        loop: Loop,
        child: ChildRun,
        on_end: Callable[[RunResult], Awaitable[RunResult]] | None,
    ) -> RunResult:
        timeout = loop.settings.child_timeout
        log.info(
            "child.started",
            kind=child.kind,
            task_id=child.task_id,
            agent_id=child.agent_id,
            parent_run_id=child.parent.run_id,
            depth=child.request.depth,
        )
        result: RunResult | None = None
        try:
            try:
                result = await asyncio.wait_for(loop.run(child.request), timeout)
            except TimeoutError:
                result = RunResult(
                    child.run_id,
                    RunStatus.FAILED,
                    error=f"timed out after {timeout:g} s (agents.defaults.child_timeout)",
                )
            if on_end is not None:
                result = await on_end(result)
            return result
        except asyncio.CancelledError:
            result = RunResult(child.run_id, RunStatus.CANCELLED)
            if on_end is not None:
                # A cancelled team task is recorded as such, even while the cancel goes on.
                await asyncio.shield(on_end(result))
            raise
        finally:
            child.status = str(result.status) if result is not None else "cancelled"
            self.children.pop(child.run_id, None)
            if self.observer is not None:
                self.observer.child_finished(child)
            await asyncio.shield(self._emit(child, EventType.CHILD_COMPLETED))

    async def _announce_when_done(self, child: ChildRun) -> None:
        assert child.task is not None and self.announce is not None
        try:
            result = await child.task
        except asyncio.CancelledError:
            return  # stopped: /stop already told the user
        except Exception:
            log.exception("child.crashed", task_id=child.task_id)
            return
        try:
            await self.announce(Announcement(child, result))
        except Exception:
            log.exception("child.announce_failed", task_id=child.task_id)

    async def _emit(self, child: ChildRun, type_: EventType) -> None:
        parent = child.parent
        active = sum(1 for c in self.children.values() if c.parent.run_id == parent.run_id)
        payload = {
            "agent": child.agent_id,
            "task_id": child.task_id,
            "kind": child.kind,
            "status": child.status,
            "background": child.background,
            "child_run_id": child.run_id,
            "active_children": active,
        }
        await self.events.publish(Event(type_, parent.run_id, parent.session_key, payload))

    # -- cancellation ----------------------------------------------------------------------

    def cancel_tree(self, run_id: str) -> int:
        """Cancel the children (at any depth) of ``run_id``; returns how many were running."""
        doomed = [c for c in self.children.values() if self._descends_from(c, run_id)]
        for child in doomed:
            if child.task is not None:
                child.task.cancel()
        return len(doomed)

    def _descends_from(self, child: ChildRun, run_id: str) -> bool:
        parent_id: str | None = child.parent.run_id
        while parent_id is not None:
            if parent_id == run_id:
                return True
            up = self.children.get(parent_id)
            parent_id = up.parent.run_id if up is not None else None
        return False

    async def aclose(self) -> None:
        """Cancel every child still running (shutdown)."""
        tasks: list[asyncio.Task[Any]] = [c.task for c in self.children.values() if c.task]
        tasks += list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def new_task_id() -> str:
    return uuid.uuid4().hex[:12]
