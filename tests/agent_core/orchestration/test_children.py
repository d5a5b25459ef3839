"""agent_core/orchestration/children.py: the orchestrator's limits on child runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core import AgentSettings, EventBus, Loop, MemoryStore, RunRequest, RunStatus
from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.tools import spawn_tool
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools.base import ToolRegistry


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
