"""Self-evolution of a predefined agent's SOUL.md (prompt section 7): when ``soul_update`` is
offered, and the whole path through the service with the fake LLM. The tool's own guardrails are
tested in tests/agent_core/tools/test_soul.py."""

from __future__ import annotations

from pathlib import Path

from agent_core import AgentSettings, RunStatus
from agent_core.self_evolution import add_self_evolution_tools
from agent_core.tools.base import ToolRegistry
from agent_core.tools.soul import SOUL_UPDATE
from agent_core.workspace import agent_workspace
from bot.app import Loopgate
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.orchestration_support import dm, offered_tools, system_prompt, tool_results

SOUL = "# SOUL.md - who you are\n\nYou are Ada.\n\n## Style\nFormal and thorough.\n"


def settings(tmp_path: Path, **kw: object) -> AgentSettings:
    return AgentSettings(
        id="main",
        model="m",
        workspace=tmp_path,
        agent_type="predefined",
        **kw,  # type: ignore[arg-type]
    )


def soul(tmp_path: Path, content: str = SOUL) -> Path:
    path = agent_workspace(tmp_path, "main") / "SOUL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_offered_to_predefined_agents_unless_locked(tmp_path: Path) -> None:
    for agent, offered in [
        (settings(tmp_path), True),
        (settings(tmp_path, soul_locked=True), False),
        (AgentSettings(id="main", model="m", workspace=tmp_path), False),
    ]:
        tools = ToolRegistry()
        add_self_evolution_tools(tools, agent)
        assert (SOUL_UPDATE in tools) is offered


async def test_feedback_changes_the_soul_for_the_next_message(tmp_path: Path, llm: FakeLLM) -> None:
    llm.script(
        tool_calls(
            call(
                SOUL_UPDATE,
                {"find": "Formal and thorough.", "replace": "Casual, brief.", "feedback": "chill"},
            )
        ),
        text("Noted: I'll keep it casual."),
        text("hey!"),
    )
    workspaces = tmp_path / "workspaces"
    soul(workspaces)
    config = make_config(
        tmp_path,
        llm,
        agents={"defaults": {"workspace": str(workspaces), "agent_type": "predefined"}},
    )
    async with Loopgate(config) as app:
        chat = dm(app)
        result = await chat.ask("please be less formal")
        assert result is not None and result.status is RunStatus.COMPLETED
        await chat.ask("hi")
    first, second, third = llm.chat_requests
    assert SOUL_UPDATE in offered_tools(first)
    assert "## Self-Evolution" in system_prompt(first)
    assert "Formal and thorough." in system_prompt(first)
    assert tool_results(second)[-1].startswith("SOUL.md updated")
    assert "Casual, brief." in system_prompt(third)


async def test_locked_soul_offers_nothing(tmp_path: Path, llm: FakeLLM) -> None:
    llm.script(text("ok"))
    workspaces = tmp_path / "workspaces"
    soul(workspaces)
    config = make_config(
        tmp_path,
        llm,
        agents={
            "defaults": {
                "workspace": str(workspaces),
                "agent_type": "predefined",
                "evolution_guardrails": {"locked_params": ["soul"]},
            }
        },
    )
    async with Loopgate(config) as app:
        await dm(app).ask("be casual")
    assert SOUL_UPDATE not in offered_tools(llm.chat_requests[0])
    assert "Self-Evolution" not in system_prompt(llm.chat_requests[0])
