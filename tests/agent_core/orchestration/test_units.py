"""Orchestration without a network: mode resolution, hidden tools, limits and the in-memory
task store that the SQL store mirrors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_core import AgentSettings, EventBus, Loop, MemoryStore, RunRequest, RunStatus
from agent_core.messages import ToolCall
from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.memory_store import MemoryOrchestrationStore
from agent_core.orchestration.modes import OrchestrationMode, resolve_profile
from agent_core.orchestration.records import (
    AgentLink,
    LinkDirection,
    TaskConflict,
    TaskStatus,
    Team,
)
from agent_core.orchestration.tools import spawn_tool
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tool_exec import run_tool
from agent_core.tools.base import ToolContext, ToolRegistry


class TestModes:
    def test_spawn_is_the_default(self) -> None:
        profile = resolve_profile("a", None, [])
        assert profile.mode is OrchestrationMode.SPAWN
        assert profile.visible_tools == ("spawn",)

    @pytest.mark.parametrize(
        ("link", "delegates"),
        [
            (AgentLink("a", "b"), True),
            (AgentLink("b", "a"), False),
            (AgentLink("b", "a", LinkDirection.INBOUND), True),
            (AgentLink("a", "b", LinkDirection.INBOUND), False),
            (AgentLink("b", "a", LinkDirection.BIDIRECTIONAL), True),
        ],
    )
    def test_delegate_needs_an_outbound_edge(self, link: AgentLink, delegates: bool) -> None:
        profile = resolve_profile("a", None, [link])
        assert (profile.mode is OrchestrationMode.DELEGATE) is delegates
        assert profile.may_delegate_to("b") is delegates

    def test_team_wins_over_links_and_reaches_team_mates(self) -> None:
        team = Team("t", "lead", ("a", "c"))
        profile = resolve_profile("a", team, [AgentLink("a", "b")])
        assert profile.mode is OrchestrationMode.TEAM
        assert profile.visible_tools == ("spawn", "delegate", "team_tasks")
        assert {t.agent_id for t in profile.targets} == {"b", "lead", "c"}
        assert not profile.is_lead("a") and profile.is_lead("lead")

    def test_hidden_reasons_name_the_mode(self) -> None:
        profile = resolve_profile("a", None, [])
        assert "agent link" in (profile.hidden_reason("delegate") or "")
        assert "team" in (profile.hidden_reason("team_tasks") or "")
        assert profile.hidden_reason("spawn") is None


async def test_a_call_to_a_hidden_tool_is_refused_with_the_reason(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.hide("delegate", "delegate needs an agent link")
    ctx = ToolContext(tmp_path, "s", "u", "a", "r")
    outcome = await run_tool(ToolCall("c1", "delegate", "{}"), registry, ctx)
    assert outcome.is_error
    assert outcome.content == "Error: delegate is not available: delegate needs an agent link."
    assert "delegate" not in [s.name for s in registry.specs()]


class TestTaskStore:
    async def test_claim_is_for_the_assignee_and_once(self) -> None:
        store = MemoryOrchestrationStore()
        task = await store.create_task("t", "x", "", created_by="lead", assignee="a")
        assert task.status is TaskStatus.ASSIGNED
        with pytest.raises(TaskConflict):
            await store.claim_task(task.id, "b")
        claimed = await store.claim_task(task.id, "a")
        assert claimed.status is TaskStatus.IN_PROGRESS
        with pytest.raises(TaskConflict):
            await store.claim_task(task.id, "a")

    async def test_only_the_assignee_finishes_and_only_once(self) -> None:
        store = MemoryOrchestrationStore()
        task = await store.create_task("t", "x", "", created_by="lead", assignee="a")
        with pytest.raises(TaskConflict):
            await store.finish_task(task.id, "b", TaskStatus.COMPLETED, "mine")
        done = await store.finish_task(task.id, "a", TaskStatus.COMPLETED, "ok")
        assert (done.status, done.result) == (TaskStatus.COMPLETED, "ok")
        with pytest.raises(TaskConflict):
            await store.finish_task(task.id, None, TaskStatus.FAILED, "late")


def _settings(tmp_path: Path, **kw: object) -> AgentSettings:
    return AgentSettings(id="main", model="m", workspace=tmp_path, **kw)  # type: ignore[arg-type]


async def test_a_child_that_outlives_child_timeout_fails_the_call(tmp_path: Path) -> None:
    settings = _settings(tmp_path, child_timeout=0.2)
    store, events = MemoryStore(), EventBus()
    provider = ScriptedProvider(
        tool_calls(call("spawn", {"task": "slow"})),
        reply("the parent gave up waiting"),
    )
    slow = asyncio.Event()
    original = provider.complete

    async def complete(request, on_delta=None):  # type: ignore[no-untyped-def]
        if "/spawn/" in request.messages[0].content and not slow.is_set():
            slow.set()
            await asyncio.sleep(5)  # kept: the child thinks for longer than child_timeout
        return await original(request, on_delta)

    provider.complete = complete  # type: ignore[method-assign]
    loops: dict[str, Loop] = {}

    async def resolve(agent_id: str) -> Loop:
        return loops[agent_id]

    orchestrator = Orchestrator(resolve, events)
    tools = ToolRegistry.of([spawn_tool(orchestrator, settings)])
    loops["main"] = Loop(settings, provider, tools, store, store, events)
    result = await loops["main"].run(RunRequest("s", "go", "u"))
    assert result.status is RunStatus.COMPLETED
    assert result.content == "the parent gave up waiting"
    tool_message = store.sessions["s"][2]
    assert "timed out after 0.2 s" in tool_message.content
    child_trace = next(t for t in store.traces if t.parent_trace_id is not None)
    assert child_trace.status == "cancelled"
