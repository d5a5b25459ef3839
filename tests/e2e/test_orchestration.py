"""Spawn, delegate and team tasks end to end: web chat → gateway → agents → fake LLM over HTTP,
with the real database, run registry and delivery pipeline."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core import EventType, RunStatus
from agent_core.orchestration.records import AgentLink, TaskStatus, Team, TeamSettings
from bot.storage import SqlTraceStore
from tests.fakes.llm_server import FakeLLM, call, delay, text, tool_calls
from tests.orchestration_support import (
    EventLog,
    dm,
    offered_tools,
    requests_of,
    service,
    store,
    system_prompt,
    tool_results,
)
from tests.service_support import until

CHILD = "/spawn/"  # in a spawned child's system prompt (its session key)


class TestSpawn:
    async def test_a_waited_spawn_returns_the_childs_answer(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("spawn", {"task": "List three primes.", "context": "Be terse."})),
            text("The helper found 2, 3, 5."),
        )
        llm.route(CHILD, text("2, 3, 5"))
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            events = EventLog(app)
            result = await chat.ask("primes please")
            assert result is not None and result.status is RunStatus.COMPLETED
            assert chat.texts() == ["The helper found 2, 3, 5."]

            child = requests_of(llm, CHILD)
            assert len(child) == 1
            prompt = system_prompt(child[0])
            assert "mode=minimal" in prompt
            assert "<extra_context>" in prompt and "Be terse." in prompt
            assert child[0].json["messages"][-1]["content"] == "List three primes."
            parent_second = llm.chat_requests[-1]
            assert any("2, 3, 5" in r for r in tool_results(parent_second))
            started = events.of(EventType.CHILD_STARTED)
            ended = events.of(EventType.CHILD_COMPLETED)
            assert [e.payload["kind"] for e in started] == ["spawn"]
            assert ended[0].payload["status"] == "completed"
            assert started[0].session_key == "agent:main:web:direct:dm-alice"

            # The child's trace hangs under the parent's spawn span.
            traces = await SqlTraceStore(app.db).recent_traces(limit=5)
            parent = next(t for t in traces if t.run_id == result.run_id)
            spawn_span = next(s for s in parent.spans if s.name == "spawn")
            assert spawn_span.kind == "async_tool"
            children = await SqlTraceStore(app.db).children_of([parent.id])
            assert len(children) == 1
            assert children[0].parent_span_id == spawn_span.id
            assert children[0].status == "completed"

    async def test_a_background_spawn_is_announced_back_into_the_chat(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("spawn", {"task": "Research the topic.", "wait": False})),
            text("I started a helper on it."),
            text("The research is done: it rains."),  # the announcement turn
        )
        llm.route(CHILD, delay(0.3, text("Finding: it rains.")))
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            result = await chat.ask("research the weather")
            assert result is not None and result.status is RunStatus.COMPLETED
            assert chat.texts() == ["I started a helper on it."]
            first_tools = tool_results(llm.chat_requests[1])
            assert "background task" in first_tools[0]
            await chat.wait_for(lambda: len(chat.texts()) == 2)
            assert chat.texts()[1] == "The research is done: it rains."
            announcement = llm.chat_requests[-1].json["messages"][-1]["content"]
            assert "[Background task" in announcement and "Finding: it rains." in announcement
            assert announcement in [
                m["content"] for m in llm.chat_requests[-1].json["messages"] if m["role"] == "user"
            ]

    async def test_a_background_result_of_no_reply_says_nothing(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("spawn", {"task": "Tidy up.", "wait": False})),
            text("On it."),
            text("NO_REPLY"),
        )
        llm.route(CHILD, text("tidied"))
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            events = EventLog(app)
            await chat.ask("tidy up")
            await events.wait_for(lambda: len(events.of(EventType.RUN_COMPLETED)) == 3)
            await asyncio.sleep(0.1)  # kept (negative check)
            assert chat.texts() == ["On it."]

    async def test_children_of_one_batch_run_in_parallel_within_the_bound(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(*(call("spawn", {"task": f"part {i}"}) for i in range(4))),
            text("all parts done"),
        )
        llm.route(CHILD, *(delay(0.3, text("ok")) for _ in range(4)))
        async with service(tmp_path, llm, max_parallel_children=2) as app:
            chat = dm(app)
            events = EventLog(app)
            await chat.ask("do four parts")
            assert chat.texts() == ["all parts done"]
            assert len(events.of(EventType.CHILD_COMPLETED)) == 4
            assert events.peak_children == 2  # in parallel, and never more than the bound
            assert len(tool_results(llm.chat_requests[-1])) == 4

    async def test_fan_out_beyond_the_per_run_limit_is_a_tool_error(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(*(call("spawn", {"task": f"part {i}"}) for i in range(3))),
            text("done"),
        )
        async with service(tmp_path, llm, max_children_per_run=2) as app:
            await dm(app).ask("go")
            results = tool_results(llm.chat_requests[-1])
            assert sum("child limit reached" in r for r in results) == 1
            assert sum(r.startswith("[task ") for r in results) == 2

    async def test_spawn_depth_is_limited(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(tool_calls(call("spawn", {"task": "level one"})), text("top done"))
        llm.route(
            CHILD,
            tool_calls(call("spawn", {"task": "level two"})),  # the child tries to spawn
            text("child gave up on spawning"),
        )
        async with service(tmp_path, llm, max_spawn_depth=1) as app:
            await dm(app).ask("go deep")
            child_second = requests_of(llm, CHILD)[-1]
            assert any("depth limit reached" in r for r in tool_results(child_second))
            assert len(requests_of(llm, CHILD)) == 2  # no grandchild ever called the model


class TestStop:
    async def test_stop_cancels_the_parent_and_its_children(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(
                call("spawn", {"task": "slow a"}),
                call("spawn", {"task": "slow b"}),
            )
        )
        llm.route(CHILD, delay(30, text("too late")), delay(30, text("too late")))
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            events = EventLog(app)
            done = await chat.send("start the slow work")
            assert done is not None
            await events.wait_for(lambda: len(events.of(EventType.CHILD_STARTED)) == 2)
            # Both children are thinking.
            await until(lambda: len(llm.chat_requests) == 3, lambda: f"{len(llm.chat_requests)}")
            assert app.registry.active_runs == 3
            await chat.send("/stop")
            result = await asyncio.wait_for(done, 5)
            assert result is not None and result.status is RunStatus.CANCELLED
            await events.wait_for(lambda: len(events.of(EventType.CHILD_COMPLETED)) == 2)
            assert {e.payload["status"] for e in events.of(EventType.CHILD_COMPLETED)} == {
                "cancelled"
            }
            assert app.orchestrator is not None and not app.orchestrator.children
            assert app.registry.active_runs == 0
            await asyncio.sleep(0.2)  # kept (negative check)
            assert len(llm.chat_requests) == 3  # nothing asked the model after the stop
            traces = await SqlTraceStore(app.db).recent_traces(limit=5)
            children = await SqlTraceStore(app.db).children_of([t.id for t in traces])
            assert [c.status for c in children] == ["cancelled", "cancelled"]

    async def test_stop_reaches_a_background_child_after_its_parent_answered(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("spawn", {"task": "slow", "wait": False})),
            text("Started."),
        )
        llm.route(CHILD, delay(30, text("too late")))
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            events = EventLog(app)
            await chat.ask("start it")
            assert app.registry.active_runs == 1  # the background child
            await chat.send("/stop")
            await events.wait_for(lambda: len(events.of(EventType.CHILD_COMPLETED)) == 1)
            assert events.of(EventType.CHILD_COMPLETED)[0].payload["status"] == "cancelled"
            assert chat.texts()[-1] != "Started."  # the stop reply
            await asyncio.sleep(0.1)  # kept (negative check)
            assert len(chat.texts()) == 2  # "Started." and the stop reply: no announcement

    async def test_stopall_reaches_children_at_every_depth(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("spawn", {"task": "level one"})))
        llm.route(
            CHILD,
            tool_calls(call("spawn", {"task": "level two"})),  # the child spawns a grandchild
            delay(30, text("too late")),
        )
        async with service(tmp_path, llm) as app:
            chat = dm(app)
            events = EventLog(app)
            done = await chat.send("go deep")
            assert done is not None
            await events.wait_for(lambda: len(events.of(EventType.CHILD_STARTED)) == 2)
            assert app.registry.active_runs == 3
            await chat.send("/stopall")
            result = await asyncio.wait_for(done, 5)
            assert result is not None and result.status is RunStatus.CANCELLED
            await events.wait_for(lambda: len(events.of(EventType.CHILD_COMPLETED)) == 2)
            assert app.registry.active_runs == 0
            assert app.orchestrator is not None and not app.orchestrator.children


class TestDelegate:
    async def test_delegate_across_a_link_sees_only_its_inputs(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        billing = "agent=billing "
        llm.script(
            tool_calls(call("write_file", {"path": "invoice.txt", "content": "INV-7: 40 EUR"})),
            tool_calls(
                call(
                    "delegate",
                    {"agent": "billing", "task": "Refund INV-7?", "files": ["invoice.txt"]},
                )
            ),
            text("Billing approved the refund."),
        )
        llm.route(
            billing,
            tool_calls(
                call("read_file", {"path": "inputs/invoice.txt"}),
                call("list_files", {"path": "."}),
            ),
            tool_calls(call("write_file", {"path": "outputs/refund.txt", "content": "ok 40"})),
            text("Refund approved: 40 EUR."),
        )
        async with service(tmp_path, llm, "billing") as app:
            await store(app).add_link(AgentLink("main", "billing", description="money"))
            app.gateway.router.invalidate()
            chat = dm(app)
            await chat.ask("I want my money back")
            assert chat.texts() == ["Billing approved the refund."]
            seen = tool_results(requests_of(llm, billing)[1])
            assert seen[0] == "INV-7: 40 EUR"
            assert sorted(seen[1].split()) == ["inputs/", "outputs/"]
            answer = tool_results(llm.chat_requests[-1])[-1]
            assert "Refund approved: 40 EUR." in answer
            assert "outputs/refund.txt" in answer
            outputs = list((tmp_path / "workspaces").rglob("outputs/refund.txt"))
            assert len(outputs) == 1 and "delegations" in outputs[0].parts

    async def test_delegate_without_a_link_is_refused(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(
            tool_calls(call("delegate", {"agent": "billing", "task": "Refund?"})),
            text("I can't reach billing."),
        )
        async with service(tmp_path, llm, "billing") as app:
            await dm(app).ask("refund please")
            first = llm.chat_requests[0]
            assert "delegate" not in offered_tools(first)  # hidden in spawn mode
            assert "spawn" in offered_tools(first)
            refusal = tool_results(llm.chat_requests[-1])[0]
            assert "delegate is not available" in refusal and "agent link" in refusal
            assert not requests_of(llm, "agent=billing ")

    async def test_a_link_elsewhere_does_not_allow_this_target(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("delegate", {"agent": "billing", "task": "Refund?"})),
            text("ok"),
        )
        async with service(tmp_path, llm, "billing", "sales") as app:
            await store(app).add_link(AgentLink("main", "sales"))
            app.gateway.router.invalidate()
            await dm(app).ask("refund please")
            assert "delegate" in offered_tools(llm.chat_requests[0])
            refusal = tool_results(llm.chat_requests[-1])[0]
            assert "no agent link allows main to delegate to 'billing'" in refusal


class TestTeam:
    async def test_a_task_created_by_the_lead_is_claimed_completed_and_collected(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        worker = "agent=worker "
        llm.script(
            tool_calls(
                call(
                    "team_tasks",
                    {
                        "action": "create",
                        "title": "Draft the intro",
                        "description": "Two sentences.",
                        "assignee": "worker",
                    },
                )
            ),
            text("The team wrote the intro."),
        )
        llm.route(
            worker,
            tool_calls(call("team_tasks", {"action": "claim"})),
            tool_calls(call("team_tasks", {"action": "complete", "result": "Intro: hello world."})),
            text("done"),
        )
        async with service(tmp_path, llm, "worker") as app:
            await store(app).create_team(Team("writers", "main", ("worker",)))
            app.gateway.router.invalidate()
            chat = dm(app)
            await chat.ask("write an intro with the team")
            assert chat.texts() == ["The team wrote the intro."]
            assert {"spawn", "delegate", "team_tasks"} <= offered_tools(llm.chat_requests[0])
            claimed = tool_results(requests_of(llm, worker)[1])[0]
            assert claimed.startswith("Claimed.") and "in_progress" in claimed
            collected = tool_results(llm.chat_requests[-1])[0]
            assert "completed by worker" in collected and "Intro: hello world." in collected
            tasks = await store(app).list_tasks("writers")
            assert [(t.status, t.assignee, t.result) for t in tasks] == [
                (TaskStatus.COMPLETED, "worker", "Intro: hello world.")
            ]

    async def test_team_workspaces_shared_and_isolated(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(
            tool_calls(call("write_file", {"path": "plan.md", "content": "the plan"})),
            text("noted"),
            tool_calls(call("list_files", {})),
            text("listed"),
        )
        async with service(tmp_path, llm, "worker") as app:
            await store(app).create_team(
                Team("iso", "main", ("worker",), TeamSettings(shared_workspace=False))
            )
            app.gateway.router.invalidate()
            await dm(app, "dm-alice").ask("write the plan")
            await dm(app, "dm-bob").ask("list the files")
            # The lead works in the team workspace of this chat; another chat has its own.
            plans = list((tmp_path / "workspaces" / "_teams").rglob("plan.md"))
            assert len(plans) == 1 and "chat" in plans[0].parts
            assert "plan.md" not in tool_results(llm.chat_requests[3])[0]

    async def test_mode_follows_links_and_teams_within_the_cache_ttl(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(text("a"), text("b"), text("c"))
        async with service(tmp_path, llm, "worker") as app:
            app.gateway.router.ttl = 0  # agents.cache_ttl: 0 — every message re-resolves
            chat = dm(app)
            await chat.ask("one")
            await store(app).add_link(AgentLink("main", "worker"))
            await chat.ask("two")
            await store(app).create_team(Team("t", "main", ("worker",)))
            await chat.ask("three")
            offered = [
                offered_tools(r) & {"spawn", "delegate", "team_tasks"} for r in llm.chat_requests
            ]
            assert offered == [
                {"spawn"},
                {"spawn", "delegate"},
                {"spawn", "delegate", "team_tasks"},
            ]
            assert "team_tasks" in system_prompt(llm.chat_requests[2])
