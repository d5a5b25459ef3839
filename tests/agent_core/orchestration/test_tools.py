"""agent_core/orchestration/tools.py: the ``spawn`` and ``delegate`` tools called by a parent
run, with children whose model is scripted (no network), and how a child's end reads as the
parent's tool result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentSettings, EventBus, Loop, MemoryStore, RunRequest, RunResult, RunStatus
from agent_core.errors import ToolError
from agent_core.orchestration.children import Announcement, ChildRun, Orchestrator
from agent_core.orchestration.modes import resolve_profile
from agent_core.orchestration.records import AgentLink
from agent_core.orchestration.tools import delegate_tool, render_result, spawn_tool
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools.base import Tool, ToolContext, ToolRegistry
from tests.waiting import wait_until


async def _save_output(args: dict[str, Any], ctx: ToolContext) -> str:
    # Writes where the child works: a delegation's folder, not the caller's workspace.
    (ctx.workspace / "outputs").mkdir(parents=True, exist_ok=True)
    (ctx.workspace / "outputs" / "report.txt").write_text(str(args["text"]))
    seen = sorted(p.name for p in (ctx.workspace / "inputs").iterdir())
    return f"saved; inputs: {seen}"


SAVE = Tool("save_output", "Save the report.", {"type": "object"}, _save_output)


class Family:
    """``main`` (linked to ``helper``) whose tools are called directly, and its children's
    loops: ``main`` itself for spawn, ``helper`` for delegate."""

    def __init__(self, tmp_path: Path, *child_script: Any, background: bool = False) -> None:
        self.workspace = tmp_path / "main-ws"
        self.workspace.mkdir()
        self.store = MemoryStore()
        self.child = ScriptedProvider(*child_script)
        self.announced: list[Announcement] = []
        self.orchestrator = Orchestrator(
            self.resolve, EventBus(), announce=self.announce if background else None
        )
        self.settings = AgentSettings(
            id="main",
            model="m",
            workspace=self.workspace,
            orchestration=resolve_profile("main", None, [AgentLink("main", "helper")]),
        )
        self.spawn = spawn_tool(self.orchestrator, self.settings)
        self.delegate = delegate_tool(self.orchestrator, self.settings)
        self.loops = {
            agent_id: Loop(
                AgentSettings(id=agent_id, model="m", workspace=tmp_path / f"{agent_id}-own"),
                self.child,
                ToolRegistry.of([SAVE]),
                self.store,
                self.store,
                EventBus(),
            )
            for agent_id in ("main", "helper")
        }

    async def resolve(self, agent_id: str) -> Loop:
        if agent_id not in self.loops:
            raise LookupError(f"no agent {agent_id}")
        return self.loops[agent_id]

    async def announce(self, announcement: Announcement) -> None:
        self.announced.append(announcement)

    def ctx(self) -> ToolContext:
        request = RunRequest("agent:main:web:direct:alice", "help me", "alice")
        return ToolContext(
            self.workspace, request.session_key, "alice", "main", "r1", request=request
        )

    def child_prompt(self) -> str:
        return self.child.requests[0].messages[0].content


def _child(kind: str = "spawn") -> ChildRun:
    parent = RunRequest("s", "go", "u")
    return ChildRun("t1", kind, "helper", parent, parent, "s", background=False)


class TestRenderResult:
    def test_a_completed_child_reads_as_its_answer_under_a_header(self) -> None:
        result = RunResult("r", RunStatus.COMPLETED, "42 rows")
        assert render_result(_child(), result) == "[task t1 · helper · completed]\n42 rows"

    def test_a_silent_child_says_it_had_no_answer(self) -> None:
        result = RunResult("r", RunStatus.COMPLETED, "NO_REPLY")
        assert render_result(_child(), result).endswith("\n(no answer)")

    @pytest.mark.parametrize(
        ("status", "error", "expected"),
        [
            (RunStatus.FAILED, "model down", "task t1 failed: model down"),
            (RunStatus.FAILED, None, "task t1 failed: unknown"),
            (RunStatus.CANCELLED, None, "task t1 was stopped"),
        ],
    )
    def test_a_child_that_did_not_succeed_is_a_tool_error(
        self, status: RunStatus, error: str | None, expected: str
    ) -> None:
        with pytest.raises(ToolError, match=expected) as raised:
            render_result(_child("delegate"), RunResult("r", status, error=error))
        assert raised.value.tool_name == "delegate"

    def test_a_background_child_is_announced_later(self) -> None:
        text = render_result(_child(), None)
        assert text.startswith("Started background task t1 (spawn, agent helper)")
        assert "don't wait" in text


class TestSpawn:
    async def test_the_child_gets_the_brief_and_context_and_its_answer_comes_back(
        self, tmp_path: Path
    ) -> None:
        family = Family(tmp_path, reply("the sum is 7"))
        out = await family.spawn.handler(
            {"task": "add 3 and 4", "context": "use integers"}, family.ctx()
        )
        assert out.endswith("· main · completed]\nthe sum is 7")
        prompt = family.child_prompt()
        assert "You are a sub-agent of main" in prompt and "use integers" in prompt
        assert family.child.requests[0].messages[-1].content == "add 3 and 4"

    async def test_the_child_works_in_its_parents_workspace(self, tmp_path: Path) -> None:
        family = Family(tmp_path, tool_calls(call("save_output", {"text": "x"})), reply("done"))
        (family.workspace / "inputs").mkdir()
        await family.spawn.handler({"task": "save it"}, family.ctx())
        assert (family.workspace / "outputs" / "report.txt").read_text() == "x"

    async def test_a_missing_task_is_refused_before_any_child_starts(self, tmp_path: Path) -> None:
        family = Family(tmp_path)
        with pytest.raises(ToolError, match="task"):
            await family.spawn.handler({"context": "no task"}, family.ctx())
        assert family.child.requests == [] and family.orchestrator.children == {}


class TestDelegate:
    async def test_an_unlinked_agent_is_refused_naming_the_allowed_ones(
        self, tmp_path: Path
    ) -> None:
        family = Family(tmp_path)
        with pytest.raises(ToolError, match=r"to 'coder' \(allowed: helper\)"):
            await family.delegate.handler({"agent": "coder", "task": "x"}, family.ctx())
        assert family.child.requests == []

    async def test_a_linked_agent_that_is_gone_is_a_tool_error(self, tmp_path: Path) -> None:
        family = Family(tmp_path)
        del family.loops["helper"]
        with pytest.raises(ToolError, match=r"agent 'helper' is not available: .*no agent"):
            await family.delegate.handler({"agent": "helper", "task": "x"}, family.ctx())

    async def test_the_delegate_sees_the_passed_files_and_its_outputs_are_listed(
        self, tmp_path: Path
    ) -> None:
        family = Family(
            tmp_path, tool_calls(call("save_output", {"text": "total 9"})), reply("report saved")
        )
        (family.workspace / "sales.csv").write_text("a,b\n")
        out = await family.delegate.handler(
            {"agent": "helper", "task": "sum it", "files": ["sales.csv"]}, family.ctx()
        )
        assert "· helper · completed]\nreport saved" in out
        [folder] = (family.workspace / "delegations").iterdir()
        assert (folder / "outputs" / "report.txt").read_text() == "total 9"
        assert out.endswith(f"Files in outputs/: delegations/{folder.name}/outputs/report.txt")
        assert "saved; inputs: ['sales.csv']" in str(family.store.sessions)
        assert f"Agent main delegated this task to you (task {folder.name})" in (
            family.child_prompt()
        )

    async def test_in_the_background_it_says_where_the_files_will_be(self, tmp_path: Path) -> None:
        family = Family(tmp_path, reply("later"), background=True)
        out = await family.delegate.handler(
            {"agent": "helper", "task": "sum it", "wait": False}, family.ctx()
        )
        [folder] = (family.workspace / "delegations").iterdir()
        assert out.startswith("Started background task")
        assert out.endswith(f"Its files will be in delegations/{folder.name}/outputs/.")
        await wait_until(lambda: family.announced)
        assert family.announced[0].result.content == "later"
