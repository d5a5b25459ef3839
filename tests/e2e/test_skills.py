"""Skills end to end: the real loop and OpenAI-compatible provider against the fake model server.

The model searches the skills, reads the file skill_search returned, and answers; reading next
to a skill but outside its folder comes back as an error result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_core import (
    FILE_TOOLS,
    AgentSettings,
    Event,
    EventBus,
    EventType,
    Loop,
    MemoryStore,
    RunRequest,
    RunStatus,
    ToolRegistry,
)
from agent_core.prompt import SKILLS_INLINE_MAX
from agent_core.providers import OpenAICompatProvider
from agent_core.retry import RetryPolicy
from agent_core.tools.skills import SKILL_TOOLS
from agent_core.workspace import user_workspace
from bot.app import Loopgate
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, RecordedRequest, call, text, tool_calls
from tests.orchestration_support import dm, offered_tools, system_prompt
from tests.orchestration_support import tool_results as results_of

SKILL_BODY = "# PDF forms\nUse fill.py with the field names from reference.md.\n"


def shared_skills(root: Path, n: int) -> Path:
    """``n`` shared skills, one of them ``pdf-forms``; returns its SKILL.md (resolved)."""
    for i in range(n - 1):
        folder = root / f"misc-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: misc-{i:02d}\ndescription: Chores about topic {i}.\n---\nbody\n",
            encoding="utf-8",
        )
    pdf = root / "pdf-forms"
    pdf.mkdir(parents=True)
    (pdf / "SKILL.md").write_text(
        "---\nname: pdf-forms\ndescription: Fill in PDF forms from data.\n---\n" + SKILL_BODY,
        encoding="utf-8",
    )
    (root / "README.txt").write_text("shared root, not a skill", encoding="utf-8")
    return (pdf / "SKILL.md").resolve()


async def run(
    llm: FakeLLM, tmp_path: Path, message: str
) -> tuple[RunStatus, str, list[dict[str, Any]]]:
    """One run of an agent with skill_search deferred; ``(status, answer, tool results)``."""
    tools = ToolRegistry.of(FILE_TOOLS)
    for tool in SKILL_TOOLS:
        tools.defer(tool)
    bus = EventBus()
    results: list[dict[str, Any]] = []

    async def record(event: Event) -> None:
        if event.type is EventType.TOOL_RESULT:
            results.append(event.payload)

    bus.subscribe(record)
    provider = OpenAICompatProvider(llm.base_url)
    store = MemoryStore()
    settings = AgentSettings(
        id="main",
        model="fake-model",
        workspace=tmp_path / "workspaces",
        skill_paths=(tmp_path / "shared",),
    )
    loop = Loop(
        settings,
        provider,
        tools,
        store,
        store,
        bus,
        retry=RetryPolicy(max_attempts=1, initial_wait=0.001, max_wait=0.01),
    )
    try:
        result = await loop.run(RunRequest(session_key="s", message=message, user_id="u1"))
    finally:
        await provider.aclose()
    return result.status, result.content, results


def offered(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools", [])]


def last_tool_message(request: RecordedRequest) -> str:
    content = request.messages[-1]["content"]
    assert request.messages[-1]["role"] == "tool"
    return str(content)


async def test_search_then_read_the_skill_then_answer(llm: FakeLLM, tmp_path: Path) -> None:
    skill_md = shared_skills(tmp_path / "shared", SKILLS_INLINE_MAX + 5)
    llm.script(
        tool_calls(call("skill_search", {"query": "fill a pdf form"})),
        tool_calls(call("read_file", {"path": str(skill_md)})),
        tool_calls(call("read_file", {"path": str(skill_md.parent.parent / "README.txt")})),
        text("Filled it, following the pdf-forms skill."),
    )
    status, answer, results = await run(llm, tmp_path, "please fill this pdf form")
    assert status is RunStatus.COMPLETED
    assert answer == "Filled it, following the pdf-forms skill."

    first, after_search, after_read, after_escape = llm.chat_requests
    assert "skill_search" in offered(first)
    system = first.messages[0]["content"]
    assert f"{SKILLS_INLINE_MAX + 5} skills" in system and "call skill_search" in system
    assert "pdf-forms" not in system  # search mode: not listed

    found = json.loads(last_tool_message(after_search))["skills"]
    assert found[0] == {
        "name": "pdf-forms",
        "description": "Fill in PDF forms from data.",
        "path": str(skill_md),
    }
    assert SKILL_BODY in last_tool_message(after_read)
    escape = last_tool_message(after_escape)
    assert "access denied" in escape and "shared root" not in escape
    assert [r["is_error"] for r in results] == [False, False, True]


async def test_few_skills_are_listed_and_skill_search_is_not_offered(
    llm: FakeLLM, tmp_path: Path
) -> None:
    shared_skills(tmp_path / "shared", 2)
    own = user_workspace(tmp_path / "workspaces", "u1") / "skills" / "notes"
    own.mkdir(parents=True)
    (own / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Keep meeting notes.\n---\nWrite notes/<date>.md.\n",
        encoding="utf-8",
    )
    llm.script(
        tool_calls(call("read_file", {"path": "skills/notes/SKILL.md"})),
        text("Noted."),
    )
    status, answer, results = await run(llm, tmp_path, "take notes")
    assert (status, answer) == (RunStatus.COMPLETED, "Noted.")
    first, second = llm.chat_requests
    assert "skill_search" not in offered(first) and "skill_search" not in offered(second)
    system = first.messages[0]["content"]
    assert "- notes: Keep meeting notes. (read skills/notes/SKILL.md)" in system
    assert "- pdf-forms: Fill in PDF forms from data. (read " in system
    assert "Write notes/<date>.md." in last_tool_message(second)
    assert [r["is_error"] for r in results] == [False]


async def test_shared_skill_paths_from_config_reach_the_service(
    llm: FakeLLM, tmp_path: Path
) -> None:
    """``skills.paths`` in config.yaml → the router's agents: search mode above 15 skills,
    and the shared skill file is readable by its absolute path, nothing next to it."""
    skill_md = shared_skills(tmp_path / "shared", SKILLS_INLINE_MAX + 5)
    llm.script(
        tool_calls(call("skill_search", {"query": "pdf forms"})),
        tool_calls(
            call("read_file", {"path": str(skill_md)}),
            call("read_file", {"path": str(skill_md.parent.parent / "README.txt")}),
        ),
        text("Done with the form."),
    )
    config = make_config(tmp_path, llm, skills={"paths": [str(tmp_path / "shared")]})
    async with Loopgate(config) as app:
        result = await dm(app).ask("fill my pdf form")
        assert result is not None and result.status is RunStatus.COMPLETED
    first, second, third = llm.chat_requests
    assert "skill_search" in offered_tools(first)
    assert "skill_search" in system_prompt(first) and "pdf-forms" not in system_prompt(first)
    assert str(skill_md) in results_of(second)[0]
    read, outside = results_of(third)[-2:]
    assert read == SKILL_BODY.rstrip("\n") or SKILL_BODY.strip() in read
    assert "access denied" in outside
