"""agent_core/tools/skills.py: the ``skill_search`` tool ranking a run's skills, its
arguments, and what it answers when nothing matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core.errors import ToolError
from agent_core.skills import Skill, discover_skills
from agent_core.tools import ToolContext
from agent_core.tools.skills import MAX_LIMIT, SKILL_SEARCH, SKILL_TOOLS
from tests.agent_core.test_skills import tool_ctx, with_skill_search, write_skill


class TestSkillSearch:
    @pytest.fixture
    def skills(self, tmp_path: Path) -> tuple[Skill, ...]:
        shared = tmp_path / "shared"
        write_skill(tmp_path / "ws" / "skills", "pdf", "", name="pdf", description="Fill PDF forms")
        write_skill(shared, "xlsx", "", name="xlsx", description="Spreadsheets: formulas, charts")
        write_skill(shared, "docx", "", name="docx", description="Word documents and PDF export")
        write_skill(shared, "slack-gif", "", name="slack-gif", description="Animated GIFs")
        return discover_skills(tmp_path / "ws", [shared])

    async def search(self, ctx: ToolContext, **args: object) -> dict[str, list[dict[str, str]]]:
        result = await SKILL_SEARCH.handler(dict(args), ctx)
        parsed: dict[str, list[dict[str, str]]] = json.loads(result)
        return parsed

    async def test_ranks_by_name_and_description_with_the_path_to_read(
        self, tmp_path: Path, skills: tuple[Skill, ...]
    ) -> None:
        found = (await self.search(tool_ctx(tmp_path, skills), query="pdf"))["skills"]
        assert [s["name"] for s in found] == ["pdf", "docx"]  # the name match first
        assert found[0] == {
            "name": "pdf",
            "description": "Fill PDF forms",
            "path": "skills/pdf/SKILL.md",
        }
        assert found[1]["path"] == str((tmp_path / "shared" / "docx" / "SKILL.md").resolve())

    async def test_description_words_and_limit(
        self, tmp_path: Path, skills: tuple[Skill, ...]
    ) -> None:
        ctx = tool_ctx(tmp_path, skills)
        found = (await self.search(ctx, query="spreadsheet charts"))["skills"]
        assert [s["name"] for s in found] == ["xlsx"]
        assert len((await self.search(ctx, query="pdf", limit=1))["skills"]) == 1

    async def test_no_match_and_bad_arguments(
        self, tmp_path: Path, skills: tuple[Skill, ...]
    ) -> None:
        ctx = tool_ctx(tmp_path, skills)
        assert "No skill matches" in await SKILL_SEARCH.handler({"query": "kubernetes"}, ctx)
        with pytest.raises(ToolError, match="query"):
            await SKILL_SEARCH.handler({"query": "  "}, ctx)
        with pytest.raises(ToolError, match="limit"):
            await SKILL_SEARCH.handler({"query": "pdf", "limit": "many"}, ctx)

    def test_is_a_read_only_deferred_tool(self) -> None:
        assert SKILL_TOOLS == (SKILL_SEARCH,) and SKILL_SEARCH.read_only
        registry = with_skill_search()
        assert "skill_search" not in [s.name for s in registry.specs()]
        assert registry.get("skill_search") is SKILL_SEARCH

    async def test_a_run_without_skills_is_told_so(self, tmp_path: Path) -> None:
        out = await SKILL_SEARCH.handler({"query": "pdf"}, tool_ctx(tmp_path))
        assert out == "No skills are available in this run."

    @pytest.mark.parametrize("query", [None, 3, ["pdf"]])
    async def test_a_query_that_is_not_text_is_refused(
        self, tmp_path: Path, skills: tuple[Skill, ...], query: object
    ) -> None:
        with pytest.raises(ToolError, match="'query'"):
            await SKILL_SEARCH.handler({"query": query}, tool_ctx(tmp_path, skills))


class TestLimit:
    @pytest.fixture
    def ctx(self, tmp_path: Path) -> ToolContext:
        shared = tmp_path / "shared"
        for i in range(MAX_LIMIT + 5):
            write_skill(shared, f"report{i:02d}", "", name=f"report{i:02d}", description="report")
        return tool_ctx(tmp_path, discover_skills(tmp_path / "ws", [shared]))

    async def count(self, ctx: ToolContext, **args: object) -> int:
        found = json.loads(await SKILL_SEARCH.handler({"query": "report", **args}, ctx))
        return len(found["skills"])

    async def test_five_by_default_and_a_null_limit_is_the_default(self, ctx: ToolContext) -> None:
        assert await self.count(ctx) == 5
        assert await self.count(ctx, limit=None) == 5

    async def test_out_of_range_limits_are_clamped(self, ctx: ToolContext) -> None:
        assert await self.count(ctx, limit=0) == 1
        assert await self.count(ctx, limit=-3) == 1
        assert await self.count(ctx, limit=500) == MAX_LIMIT

    async def test_a_whole_float_counts_as_an_integer(self, ctx: ToolContext) -> None:
        assert await self.count(ctx, limit=3.0) == 3

    @pytest.mark.parametrize("limit", [2.5, True, "3"])
    async def test_anything_else_is_refused(self, ctx: ToolContext, limit: object) -> None:
        with pytest.raises(ToolError, match="'limit' must be an integer"):
            await self.count(ctx, limit=limit)
