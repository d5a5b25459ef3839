"""agent_core/orchestration/team_tasks.py: the ``team_tasks`` tool on an in-memory task store,
with team members whose runs are scripted (no network): every action, its bad arguments, and
dispatching a task to a member, whose run's end is recorded on the task."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentSettings, EventBus, Loop, MemoryStore, RunRequest
from agent_core.errors import ToolError
from agent_core.orchestration.children import Announcement, Orchestrator
from agent_core.orchestration.memory_store import MemoryOrchestrationStore
from agent_core.orchestration.modes import TEAM_TASKS, OrchestrationMode, OrchestrationProfile
from agent_core.orchestration.records import TaskComment, TaskStatus, Team, TeamTask
from agent_core.orchestration.team_tasks import MAX_LISTED, describe, team_tasks_tool
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools.base import Tool, ToolContext, ToolRegistry
from tests.waiting import wait_until

TEAM = Team("crew", lead="main", members=("helper",))


def settings(tmp_path: Path, agent_id: str, team: Team | None = TEAM) -> AgentSettings:
    profile = OrchestrationProfile(OrchestrationMode.TEAM, team) if team else OrchestrationProfile()
    return AgentSettings(id=agent_id, model="m", workspace=tmp_path / "ws", orchestration=profile)


class Crew:
    """The lead ``main`` and its member ``helper``, each a loop with the team_tasks tool."""

    def __init__(self, tmp_path: Path, *helper_script: Any, background: bool = False) -> None:
        self.tasks = MemoryOrchestrationStore(teams=[TEAM])
        self.sessions = MemoryStore()
        self.announced: list[Announcement] = []
        self.helper = ScriptedProvider(*helper_script)
        self.loops: dict[str, Loop] = {}
        self.orchestrator = Orchestrator(
            self.resolve, EventBus(), announce=self.announce if background else None
        )
        self.tools: dict[str, Tool] = {}
        for agent_id, provider in (("main", ScriptedProvider()), ("helper", self.helper)):
            agent = settings(tmp_path, agent_id)
            tool = team_tasks_tool(self.orchestrator, agent, self.tasks)
            self.tools[agent_id] = tool
            self.loops[agent_id] = Loop(
                agent, provider, ToolRegistry.of([tool]), self.sessions, self.sessions, EventBus()
            )
        self.workspace = tmp_path / "ws"

    async def resolve(self, agent_id: str) -> Loop:
        return self.loops[agent_id]

    async def announce(self, announcement: Announcement) -> None:
        self.announced.append(announcement)

    def ctx(self, agent_id: str = "main", *, task_id: str | None = None) -> ToolContext:
        request = RunRequest(
            "agent:main:web:group:room",
            "lead the crew",
            "alice",
            agent_id=agent_id,
            chat_id="web:room",
            team_task_id=task_id,
        )
        return ToolContext(
            self.workspace, request.session_key, "alice", agent_id, "r1", request=request
        )

    async def act(self, agent_id: str = "main", task_id: str | None = None, **args: Any) -> str:
        return await self.tools[agent_id].handler(args, self.ctx(agent_id, task_id=task_id))

    async def only_task(self) -> TeamTask:
        [task] = self.tasks.tasks.values()
        return task


# -- describe ------------------------------------------------------------------------------


def task(**kw: Any) -> TeamTask:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    fields: dict[str, Any] = {
        "id": "t1",
        "team_id": "crew",
        "title": "Count rows",
        "description": "in sales.csv",
        "status": TaskStatus.OPEN,
        "created_by": "main",
        "created_at": now,
        "updated_at": now,
    }
    return TeamTask(**(fields | kw))


def test_describe_a_line_per_task_with_the_first_line_of_its_result() -> None:
    assert describe(task()) == "t1 [open] Count rows"
    done = task(status=TaskStatus.COMPLETED, assignee="helper", result="x" * 300 + "\nmore")
    assert describe(done) == "t1 [completed → helper] Count rows — result: " + "x" * 200


def test_describe_in_full_has_the_author_description_comments_and_result() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    full = task(
        description="",
        comments=(TaskComment("helper", "on it", at),),
        result="42",
        status=TaskStatus.COMPLETED,
    )
    assert describe(full, full=True).splitlines() == [
        "t1 [completed] Count rows",
        "created by main",
        "(no description)",
        "comment by helper: on it",
        "result:",
        "42",
    ]


# -- the actions ---------------------------------------------------------------------------


async def test_an_agent_outside_a_team_is_told_so(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    loner = settings(tmp_path, "loner", team=None)
    tool = team_tasks_tool(crew.orchestrator, loner, crew.tasks)
    with pytest.raises(ToolError, match="not in a team"):
        await tool.handler({"action": "list"}, crew.ctx("loner"))


@pytest.mark.parametrize("action", [None, "delete", ""])
async def test_an_unknown_action_names_the_actions(tmp_path: Path, action: str | None) -> None:
    with pytest.raises(ToolError, match="must be one of create, list, get, assign, claim"):
        await Crew(tmp_path).act(action=action)


async def test_create_without_an_assignee_leaves_the_task_open(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    out = await crew.act(action="create", title=" Count rows ", description="in sales.csv")
    created = await crew.only_task()
    assert (created.title, created.status, created.assignee) == ("Count rows", "open", None)
    assert out == f"Created task {created.id}.\n{describe(created, full=True)}"
    assert crew.helper.requests == []  # nobody was asked to do it


async def test_create_for_oneself_assigns_without_dispatching(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    await crew.act(action="create", title="Plan", assignee="main")
    created = await crew.only_task()
    assert (created.status, created.assignee) == (TaskStatus.ASSIGNED, "main")
    assert crew.helper.requests == []


async def test_a_non_member_cannot_be_assigned_and_nothing_is_created(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    with pytest.raises(
        ToolError, match=r"'stranger' is not in team crew \(members: main, helper\)"
    ):
        await crew.act(action="create", title="Plan", assignee="stranger")
    assert crew.tasks.tasks == {}


async def test_list_filters_by_status_and_shows_the_latest(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    assert await crew.act(action="list") == "No tasks."
    for i in range(MAX_LISTED + 2):
        await crew.act(action="create", title=f"task {i}")
    await crew.tasks.create_task("other-team", "not ours", "", created_by="x")
    out = (await crew.act(action="list")).splitlines()
    assert out[0] == f"{MAX_LISTED + 2} task(s) in team crew:"
    assert len(out) == MAX_LISTED + 1
    assert out[1].endswith("task 2") and out[-1].endswith(f"task {MAX_LISTED + 1}")
    assert await crew.act(action="list", status="completed") == "No tasks."
    with pytest.raises(ToolError, match="status must be one of open, assigned, in_progress"):
        await crew.act(action="list", status="done")


async def test_get_needs_a_task_of_this_team(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    foreign = await crew.tasks.create_task("other-team", "secret", "", created_by="x")
    with pytest.raises(ToolError, match="'task_id'"):
        await crew.act(action="get")  # a lead's run has no task of its own
    with pytest.raises(ToolError, match=f"no task '{foreign.id}' in team crew"):
        await crew.act(action="get", task_id=foreign.id)
    with pytest.raises(ToolError, match="no task 'nope' in team crew"):
        await crew.act(action="get", task_id="nope")


async def test_claim_comment_complete_by_the_assignee(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    await crew.act(action="create", title="Plan", assignee="main")
    t = await crew.only_task()
    assert (await crew.act(action="claim", task_id=t.id)).startswith("Claimed.")
    assert await crew.act(action="comment", task_id=t.id, text="half way") == (
        f"Comment added to {t.id}."
    )
    assert await crew.act(action="complete", task_id=t.id, result="the plan") == (
        f"Task {t.id} is completed."
    )
    done = await crew.only_task()
    assert (done.status, done.result, done.assignee) == ("completed", "the plan", "main")
    assert [(c.author, c.text) for c in done.comments] == [("main", "half way")]
    assert "comment by main: half way" in await crew.act(action="get", task_id=t.id)


async def test_complete_can_report_a_failure(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    await crew.act(action="create", title="Plan")
    t = await crew.only_task()
    out = await crew.act(action="complete", task_id=t.id, result="no data", failed=True)
    assert out == f"Task {t.id} is failed."
    with pytest.raises(ToolError, match="'failed' must be true or false"):
        await crew.act(action="complete", task_id=t.id, result="x", failed="yes")
    with pytest.raises(ToolError, match="'result'"):
        await crew.act(action="complete", task_id=t.id)


async def test_a_dispatched_run_acts_on_its_own_task_by_default(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    t = await crew.tasks.create_task("crew", "Count", "", created_by="main", assignee="helper")
    assert (await crew.act("helper", task_id=t.id, action="claim")).startswith("Claimed.")
    await crew.act("helper", task_id=t.id, action="complete", result="42")
    assert (await crew.only_task()).result == "42"


async def test_state_conflicts_become_tool_errors(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    t = await crew.tasks.create_task("crew", "Count", "", created_by="main", assignee="helper")
    with pytest.raises(ToolError, match="can't be claimed"):
        await crew.act(action="claim", task_id=t.id)  # it is the helper's
    await crew.act("helper", task_id=t.id, action="complete", result="42")
    with pytest.raises(ToolError, match="already completed"):
        await crew.act("helper", task_id=t.id, action="complete", result="again")
    with pytest.raises(ToolError, match="can't be reassigned"):
        await crew.act(action="assign", task_id=t.id, assignee="main")


async def test_assign_to_oneself_does_not_dispatch(tmp_path: Path) -> None:
    crew = Crew(tmp_path)
    await crew.act(action="create", title="Plan")
    t = await crew.only_task()
    assert (await crew.act(action="assign", task_id=t.id, assignee="main")).startswith(
        "Assigned to you."
    )
    assert crew.helper.requests == []


# -- dispatching to a member ---------------------------------------------------------------


async def test_a_dispatched_task_ends_with_the_members_answer(tmp_path: Path) -> None:
    crew = Crew(tmp_path, reply("There are 42 rows."))
    out = await crew.act(
        action="create", title="Count rows", description="in sales.csv", assignee="helper"
    )
    done = await crew.only_task()
    assert (done.status, done.assignee, done.result) == (
        "completed",
        "helper",
        "There are 42 rows.",
    )
    assert out == f"Task {done.id} is completed by helper.\n{describe(done, full=True)}"
    [asked] = crew.helper.requests
    brief = asked.messages[-1].content
    assert brief.startswith(f"Team task {done.id} from main: Count rows")
    assert "in sales.csv" in brief
    assert "You work in team crew (lead main)." in asked.messages[0].content


async def test_a_member_that_completes_the_task_itself_keeps_its_result(tmp_path: Path) -> None:
    crew = Crew(
        tmp_path,
        tool_calls(call(TEAM_TASKS, {"action": "claim"})),
        tool_calls(call(TEAM_TASKS, {"action": "complete", "result": "42 rows exactly"})),
        reply("All done, see the task."),
    )
    await crew.act(action="create", title="Count rows", assignee="helper")
    done = await crew.only_task()
    assert (done.status, done.result) == ("completed", "42 rows exactly")


async def test_a_silent_answer_completes_the_task_with_no_result(tmp_path: Path) -> None:
    crew = Crew(tmp_path, reply("NO_REPLY"))
    await crew.act(action="create", title="Tidy up", assignee="helper")
    done = await crew.only_task()
    assert (done.status, done.result) == ("completed", "")


async def test_a_failed_run_fails_the_task_and_the_call(tmp_path: Path) -> None:
    crew = Crew(tmp_path, ValueError("the model broke"))
    with pytest.raises(ToolError, match=r"task \w+ failed: .*the model broke"):
        await crew.act(action="create", title="Count rows", assignee="helper")
    done = await crew.only_task()
    assert done.status is TaskStatus.FAILED and "the model broke" in (done.result or "")


async def test_assign_dispatches_to_the_member(tmp_path: Path) -> None:
    crew = Crew(tmp_path, reply("done it"))
    await crew.act(action="create", title="Later")
    t = await crew.only_task()
    out = await crew.act(action="assign", task_id=t.id, assignee="helper")
    assert out.startswith(f"Task {t.id} is completed by helper.")


async def test_without_waiting_the_result_is_announced(tmp_path: Path) -> None:
    crew = Crew(tmp_path, reply("background answer"), background=True)
    out = await crew.act(action="create", title="Slow job", assignee="helper", wait=False)
    assert out.startswith("Started background task")
    await wait_until(lambda: crew.announced, 5, what="no announcement")
    [announcement] = crew.announced
    assert announcement.result.content == "background answer"
    done = await crew.only_task()
    assert (done.status, done.result) == ("completed", "background answer")
