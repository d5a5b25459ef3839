"""agent_core/tools/soul.py: ``soul_update``, the one way a predefined agent changes its shared
SOUL.md: one passage at a time, no headings, within the delta guardrail, every old version kept.
When it is offered is tested in tests/agent_core/test_self_evolution.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_core import AgentSettings
from agent_core.errors import ToolError
from agent_core.tools.base import ToolContext
from agent_core.tools.soul import HISTORY_DIR, MIN_CHANGE_CHARS, soul_update_tool
from agent_core.workspace import agent_workspace

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


def ctx(tmp_path: Path, user_id: str = "telegram:42") -> ToolContext:
    return ToolContext(tmp_path, "s", user_id, "main", "r1")


async def test_a_small_style_change_is_applied_and_the_old_version_kept(tmp_path: Path) -> None:
    path = soul(tmp_path)
    tool = soul_update_tool(settings(tmp_path))
    args = {"find": "Formal and thorough.", "replace": "Casual and brief.", "feedback": "x"}
    assert "updated" in await tool.handler(args, ctx(tmp_path))
    assert path.read_text(encoding="utf-8") == SOUL.replace(
        "Formal and thorough.", "Casual and brief."
    )
    [kept] = (path.parent / HISTORY_DIR).iterdir()
    assert kept.read_text(encoding="utf-8") == SOUL
    assert kept.name.endswith(".md") and "telegram" in kept.name  # who changed it


@pytest.mark.parametrize(
    ("find", "replace", "error"),
    [
        ("You are Ada.", "# You are Bob.", "headings"),
        ("# SOUL.md - who you are", "# who", "headings"),
        ("Not in the file.", "x", "does not occur"),
        ("are", "were", "more than once"),
        ("Formal and thorough.", "y" * 500, "larger than allowed"),
    ],
)
async def test_refused_changes_leave_the_file_alone(
    tmp_path: Path, find: str, replace: str, error: str
) -> None:
    path = soul(tmp_path)
    tool = soul_update_tool(settings(tmp_path))
    with pytest.raises(ToolError, match=error):
        await tool.handler({"find": find, "replace": replace, "feedback": "f"}, ctx(tmp_path))
    assert path.read_text(encoding="utf-8") == SOUL
    assert not (path.parent / HISTORY_DIR).exists()


async def test_the_delta_grows_with_the_file_and_its_guardrail(tmp_path: Path) -> None:
    long_soul = SOUL + "\n".join(f"Line {i} of the style guide." for i in range(200)) + "\n"
    soul(tmp_path, long_soul)
    passage = "\n".join(f"Line {i} of the style guide." for i in range(20))  # ~560 chars
    args = {"find": passage, "replace": "Short.", "feedback": "f"}
    with pytest.raises(ToolError, match="larger than allowed"):
        await soul_update_tool(settings(tmp_path, soul_max_delta=0.05)).handler(args, ctx(tmp_path))
    assert "updated" in await soul_update_tool(settings(tmp_path)).handler(args, ctx(tmp_path))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"replace": "x", "feedback": "f"}, "'find' and 'replace'"),
        ({"find": "  ", "replace": "x", "feedback": "f"}, "'find' and 'replace'"),
        ({"find": "Formal and thorough.", "replace": 3, "feedback": "f"}, "'find' and 'replace'"),
        ({"find": "Formal and thorough.", "replace": "x"}, "'feedback'"),
        ({"find": "Formal and thorough.", "replace": "x", "feedback": " "}, "'feedback'"),
    ],
)
async def test_missing_or_bad_arguments_are_refused(
    tmp_path: Path, args: dict[str, object], error: str
) -> None:
    path = soul(tmp_path)
    with pytest.raises(ToolError, match=error):
        await soul_update_tool(settings(tmp_path)).handler(args, ctx(tmp_path))
    assert path.read_text(encoding="utf-8") == SOUL


async def test_an_agent_without_a_soul_is_told_so(tmp_path: Path) -> None:
    args = {"find": "a", "replace": "b", "feedback": "f"}
    with pytest.raises(ToolError, match=r"no SOUL\.md yet"):
        await soul_update_tool(settings(tmp_path)).handler(args, ctx(tmp_path))
    assert not agent_workspace(tmp_path, "main").exists()


async def test_a_short_soul_still_allows_a_one_line_change(tmp_path: Path) -> None:
    # 10 % of this file is ~7 characters: the floor lets a real sentence through.
    path = soul(tmp_path)
    new = "Warm, direct and brief; plain words, no jargon, one question at a time."
    assert len(SOUL) * 0.1 < len(new) <= MIN_CHANGE_CHARS
    args = {"find": "Formal and thorough.", "replace": new, "feedback": "f"}
    assert "updated" in await soul_update_tool(settings(tmp_path)).handler(args, ctx(tmp_path))
    assert new in path.read_text(encoding="utf-8")


async def test_concurrent_updates_apply_one_after_the_other(tmp_path: Path) -> None:
    path = soul(tmp_path, SOUL + "Use metric units.\n")
    tool = soul_update_tool(settings(tmp_path))
    changes = [
        {"find": "Formal and thorough.", "replace": "Casual.", "feedback": "f"},
        {"find": "Use metric units.", "replace": "Use imperial units.", "feedback": "f"},
    ]
    await asyncio.gather(
        *(tool.handler(args, ctx(tmp_path, f"user-{i}")) for i, args in enumerate(changes))
    )
    text = path.read_text(encoding="utf-8")
    assert "Casual." in text and "Use imperial units." in text  # neither update was lost
    kept = sorted((path.parent / HISTORY_DIR).iterdir())
    assert len(kept) == 2
    assert not list(path.parent.glob(".*.tmp"))  # the atomic write left nothing behind
