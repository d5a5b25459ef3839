"""Skills (Agent Skills format): discovery, the prompt's sections 8/9, when skill_search is
offered, and the confinement of reading a shared skill to its own folder. The skill_search tool
itself is tested in ``tests/agent_core/tools/test_skills.py``."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent_core import FILE_TOOLS, AgentSettings, RunRequest, ToolRegistry
from agent_core.bootstrap import PromptMode
from agent_core.errors import ToolError
from agent_core.prompt import SKILLS_INLINE_MAX, build_system_prompt
from agent_core.skills import DESCRIPTION_MAX_CHARS, Skill, discover_skills, shared_folders
from agent_core.testing import ScriptedProvider, reply
from agent_core.tools import LIST_FILES, READ_FILE, WRITE_FILE, ToolContext
from agent_core.tools.skills import SKILL_TOOLS
from tests.agent_core.test_loop import make_loop, request

NOW = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def write_skill(root: Path, folder: str, body: str, **front: str) -> Path:
    """``root/folder/SKILL.md`` with ``front`` as YAML front matter (none when empty)."""
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"{k}: {json.dumps(v)}\n" for k, v in front.items())
    path.write_text(f"---\n{head}---\n{body}" if front else body, encoding="utf-8")
    return path


def many_skills(root: Path, n: int) -> None:
    for i in range(n):
        write_skill(root, f"s{i:02d}", "body", name=f"s{i:02d}", description=f"skill number {i}")


class TestDiscovery:
    def test_folder_skill_takes_name_and_description_from_front_matter(
        self, tmp_path: Path
    ) -> None:
        path = write_skill(
            tmp_path / "skills",
            "pdf",
            "# PDF\nUse pypdf.\n",
            name="pdf-forms",
            description="Fill and read PDF forms.",
        )
        (skill,) = discover_skills(tmp_path)
        assert skill == Skill(
            "pdf-forms", "Fill and read PDF forms.", path.resolve(), path.parent.resolve(), False
        )

    def test_flat_file_is_a_skill_named_after_the_file(self, tmp_path: Path) -> None:
        (tmp_path / "skills").mkdir()
        flat = tmp_path / "skills" / "deploy.md"
        flat.write_text("# Deploy\n\nHow to deploy the app.\nMore.\n", encoding="utf-8")
        with capture_logs() as logs:
            (skill,) = discover_skills(tmp_path)
        assert (skill.name, skill.description) == ("deploy", "How to deploy the app.")
        assert skill.path == skill.folder == flat.resolve()
        assert not [e for e in logs if e["event"] == "skills.bad_front_matter"]

    @pytest.mark.parametrize(
        "text",
        [
            "# Title\nFirst real line.\n",  # no front matter at all
            "---\nname: [unclosed\n---\nFirst real line.\n",  # invalid YAML
            "---\n- a list\n---\nFirst real line.\n",  # not a mapping
            "---\nname: x\nno closing line\nFirst real line.\n",  # never closed
            "---\nname: 42\ndescription: ''\n---\nFirst real line.\n",  # wrong types
        ],
    )
    def test_bad_front_matter_falls_back_and_warns(self, tmp_path: Path, text: str) -> None:
        path = tmp_path / "skills" / "odd" / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
        with capture_logs() as logs:
            (skill,) = discover_skills(tmp_path)
        assert skill.name == "odd"
        if not text.startswith("---\nname: x\nno closing"):
            assert skill.description == "First real line."
        warnings = [e for e in logs if e["event"] == "skills.bad_front_matter"]
        assert warnings and warnings[0]["path"] == str(path.resolve())
        assert warnings[0]["log_level"] == "warning"

    def test_description_is_one_line_and_capped(self, tmp_path: Path) -> None:
        write_skill(tmp_path / "skills", "long", "", name="long", description="word\n" * 200)
        (skill,) = discover_skills(tmp_path)
        assert "\n" not in skill.description
        assert len(skill.description) == DESCRIPTION_MAX_CHARS
        assert skill.description.endswith("…")

    def test_workspace_shadows_shared_and_result_is_sorted(self, tmp_path: Path) -> None:
        ws, first, second = tmp_path / "ws", tmp_path / "first", tmp_path / "second"
        write_skill(ws / "skills", "pdf", "", name="pdf", description="mine")
        write_skill(first, "pdf", "", name="pdf", description="shared pdf")
        write_skill(first, "zip", "", name="zip", description="first zip")
        write_skill(second, "zip", "", name="zip", description="second zip")
        write_skill(second, "csv", "", name="csv", description="csv files")
        found = discover_skills(ws, [first, second])
        assert [(s.name, s.description, s.shared) for s in found] == [
            ("csv", "csv files", True),
            ("pdf", "mine", False),
            ("zip", "first zip", True),
        ]
        assert shared_folders(found) == ((second / "csv").resolve(), (first / "zip").resolve())

    def test_folder_skill_wins_over_flat_file_of_the_same_name(self, tmp_path: Path) -> None:
        write_skill(tmp_path / "skills", "pdf", "", name="pdf", description="folder")
        (tmp_path / "skills" / "pdf.md").write_text("flat\n", encoding="utf-8")
        assert [s.description for s in discover_skills(tmp_path)] == ["folder"]

    def test_links_out_of_the_root_are_ignored(self, tmp_path: Path) -> None:
        outside = tmp_path / "outside"
        write_skill(outside, "evil", "", name="evil", description="escapes")
        (outside / "evil.md").write_text("escapes\n", encoding="utf-8")
        skills = tmp_path / "ws" / "skills"
        write_skill(skills, "good", "", name="good", description="stays")
        (skills / "evil").symlink_to(outside / "evil")  # a linked folder
        (skills / "evil2.md").symlink_to(outside / "evil.md")  # a linked flat file
        (skills / "sneaky").mkdir()
        (skills / "sneaky" / "SKILL.md").symlink_to(outside / "evil" / "SKILL.md")
        (skills / "alias").symlink_to(skills / "good")  # inside the root: fine
        with capture_logs() as logs:
            found = discover_skills(tmp_path / "ws")
        # "alias" is the same skill as "good" (a link inside the root): one of them is kept.
        assert [(s.name, s.folder.name) for s in found] == [("good", "good")]
        assert all(outside not in s.path.parents for s in found)
        assert len([e for e in logs if e["event"] == "skills.outside_root"]) == 3

    def test_a_skills_folder_linked_out_of_the_workspace_is_ignored(self, tmp_path: Path) -> None:
        write_skill(tmp_path / "elsewhere", "x", "", name="x", description="x")
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / "skills").symlink_to(tmp_path / "elsewhere")
        assert discover_skills(tmp_path / "ws") == ()

    def test_missing_roots_folders_without_skill_md_and_readmes(self, tmp_path: Path) -> None:
        (tmp_path / "skills" / "assets").mkdir(parents=True)
        (tmp_path / "skills" / "README.md").write_text("About these skills\n", encoding="utf-8")
        assert discover_skills(tmp_path, [tmp_path / "nope"]) == ()

    def test_an_edited_skill_is_seen_on_the_next_discovery(self, tmp_path: Path) -> None:
        path = write_skill(tmp_path / "skills", "pdf", "", name="pdf", description="old")
        assert discover_skills(tmp_path)[0].description == "old"
        write_skill(tmp_path / "skills", "pdf", "", name="pdf", description="brand new text")
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert discover_skills(tmp_path)[0].description == "brand new text"

    def test_a_rewrite_that_keeps_size_and_modification_time_is_seen(self, tmp_path: Path) -> None:
        path = write_skill(tmp_path / "skills", "pdf", "", name="pdf", description="one")
        st = path.stat()
        assert discover_skills(tmp_path)[0].description == "one"
        write_skill(tmp_path / "skills", "pdf", "", name="pdf", description="two")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as a sync tool restoring times
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        assert discover_skills(tmp_path)[0].description == "two"


def prompt(
    tmp_path: Path,
    skills: tuple[Skill, ...] | None,
    *,
    tools: ToolRegistry | None = None,
    mode: PromptMode = PromptMode.FULL,
    **settings: object,
) -> str:
    s = AgentSettings(id="main", model="m", workspace=tmp_path, **settings)  # type: ignore[arg-type]
    req = RunRequest("agent:main:x", "hi", "u1", channel="web")
    return build_system_prompt(
        s,
        req,
        tools if tools is not None else with_skill_search(),
        tmp_path / "ws",
        now=NOW,
        mode=mode,
        skill_list=skills,
    )


def with_skill_search() -> ToolRegistry:
    tools = ToolRegistry.of(FILE_TOOLS)
    for tool in SKILL_TOOLS:
        tools.defer(tool)
    return tools


class TestPrompt:
    def test_up_to_fifteen_skills_are_listed_with_the_path_to_read(self, tmp_path: Path) -> None:
        ws, shared = tmp_path / "ws", tmp_path / "shared"
        write_skill(ws / "skills", "pdf", "", name="pdf", description="PDF forms")
        shared_md = write_skill(shared, "zip", "", name="zip", description="Zip archives")
        many_skills(shared, SKILLS_INLINE_MAX - 2)
        found = discover_skills(ws, [shared])
        assert len(found) == SKILLS_INLINE_MAX
        text = prompt(tmp_path, found)
        assert "- pdf: PDF forms (read skills/pdf/SKILL.md)" in text
        assert f"- zip: Zip archives (read {shared_md.resolve()})" in text
        assert "Before using one, read its file" in text
        assert "skill_search" not in text

    def test_more_than_fifteen_skills_switch_to_search_mode(self, tmp_path: Path) -> None:
        many_skills(tmp_path / "ws" / "skills", SKILLS_INLINE_MAX + 1)
        text = prompt(tmp_path, discover_skills(tmp_path / "ws"))
        assert f"{SKILLS_INLINE_MAX + 1} skills" in text
        assert "call skill_search with a few keywords" in text
        assert "read the file it returns" in text
        assert "- s00:" not in text  # not listed

    def test_search_mode_needs_the_tool_else_everything_is_listed(self, tmp_path: Path) -> None:
        many_skills(tmp_path / "ws" / "skills", SKILLS_INLINE_MAX + 1)
        found = discover_skills(tmp_path / "ws")
        text = prompt(tmp_path, found, tools=ToolRegistry.of(FILE_TOOLS))
        assert "skill_search" not in text
        assert "- s15: skill number 15 (read skills/s15/SKILL.md)" in text

    def test_minimal_mode_has_no_skills_section(self, tmp_path: Path) -> None:
        write_skill(tmp_path / "ws" / "skills", "pdf", "", name="pdf", description="PDF forms")
        text = prompt(tmp_path, discover_skills(tmp_path / "ws"), mode=PromptMode.MINIMAL)
        assert "## Skills" not in text and "PDF forms" not in text

    def test_without_a_list_the_workspace_and_shared_paths_are_searched(
        self, tmp_path: Path
    ) -> None:
        write_skill(tmp_path / "ws" / "skills", "pdf", "", name="pdf", description="PDF forms")
        write_skill(tmp_path / "shared", "zip", "", name="zip", description="Zip archives")
        text = prompt(tmp_path, None, skill_paths=(tmp_path / "shared",))
        assert "- pdf: PDF forms" in text and "- zip: Zip archives" in text


class TestOfferedOnlyInSearchMode:
    async def offered(self, tmp_path: Path, n: int, *, minimal: bool = False) -> list[str]:
        many_skills(tmp_path / "shared", n)
        provider = ScriptedProvider(reply("ok"))
        loop, _, _ = make_loop(
            tmp_path, provider, tools=with_skill_search(), skill_paths=(tmp_path / "shared",)
        )
        await loop.run(request(minimal_prompt=minimal))
        return [spec.name for spec in provider.requests[0].tools]

    async def test_not_offered_with_fifteen_skills(self, tmp_path: Path) -> None:
        assert "skill_search" not in await self.offered(tmp_path, SKILLS_INLINE_MAX)

    async def test_offered_with_sixteen_skills(self, tmp_path: Path) -> None:
        assert "skill_search" in await self.offered(tmp_path, SKILLS_INLINE_MAX + 1)

    async def test_not_offered_to_a_minimal_run(self, tmp_path: Path) -> None:
        names = await self.offered(tmp_path, SKILLS_INLINE_MAX + 1, minimal=True)
        assert "skill_search" not in names


def tool_ctx(tmp_path: Path, skills: tuple[Skill, ...] = ()) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ToolContext(
        workspace=ws,
        session_key="s",
        user_id="u",
        agent_id="main",
        run_id="r",
        skills=skills,
        read_roots=shared_folders(skills),
    )


class TestConfinement:
    @pytest.fixture
    def ctx(self, tmp_path: Path) -> ToolContext:
        shared = tmp_path / "shared"
        write_skill(shared, "pdf", "# PDF\nsteps\n", name="pdf", description="PDF forms")
        (shared / "pdf" / "reference.md").write_text("the reference", encoding="utf-8")
        (shared / "pdf" / "scripts").mkdir()
        (shared / "pdf" / "scripts" / "fill.py").write_text("print(1)", encoding="utf-8")
        (shared / "notes.txt").write_text("not a skill", encoding="utf-8")
        (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
        (shared / "pdf" / "leak").symlink_to(tmp_path / "secret.txt")
        (shared / "pdf" / "up").symlink_to(tmp_path)  # a linked folder leading out
        return tool_ctx(tmp_path, discover_skills(tmp_path / "ws", [shared]))

    async def read(self, ctx: ToolContext, path: Path | str) -> str:
        return await READ_FILE.handler({"path": str(path)}, ctx)

    async def test_a_shared_skill_and_its_files_can_be_read(
        self, tmp_path: Path, ctx: ToolContext
    ) -> None:
        folder = (tmp_path / "shared" / "pdf").resolve()
        assert "steps" in await self.read(ctx, folder / "SKILL.md")
        assert await self.read(ctx, folder / "reference.md") == "the reference"
        assert await self.read(ctx, folder / "scripts" / "fill.py") == "print(1)"
        listing = await LIST_FILES.handler({"path": str(folder)}, ctx)
        assert f"{folder / 'reference.md'}" in listing.splitlines()
        assert f"{folder / 'scripts'}/" in listing.splitlines()

    @pytest.mark.parametrize(
        "path",
        [
            "shared/pdf/../notes.txt",  # .. out of the skill, into the shared root
            "shared/notes.txt",  # the shared root itself is not readable
            "shared/pdf/../../secret.txt",  # .. out of everything
            "shared/pdf/leak",  # a link in the skill pointing out of it
            "shared/pdf/up/secret.txt",  # through a linked folder
            "secret.txt",
        ],
    )
    async def test_escapes_are_denied(self, tmp_path: Path, ctx: ToolContext, path: str) -> None:
        with pytest.raises(ToolError, match="access denied"):
            await self.read(ctx, f"{tmp_path}/{path}")

    async def test_list_files_of_the_shared_root_is_denied(
        self, tmp_path: Path, ctx: ToolContext
    ) -> None:
        with pytest.raises(ToolError, match="access denied"):
            await LIST_FILES.handler({"path": str(tmp_path / "shared")}, ctx)

    async def test_a_shared_skill_is_never_written(self, tmp_path: Path, ctx: ToolContext) -> None:
        folder = tmp_path / "shared" / "pdf"
        before = (folder / "SKILL.md").read_text(encoding="utf-8")
        for target in (folder / "SKILL.md", folder / "new.md"):
            with pytest.raises(ToolError, match=r"access denied.*read-only"):
                await WRITE_FILE.handler({"path": str(target), "content": "pwned"}, ctx)
        assert (folder / "SKILL.md").read_text(encoding="utf-8") == before
        assert not (folder / "new.md").exists()

    async def test_without_read_roots_a_shared_skill_is_out_of_reach(
        self, tmp_path: Path, ctx: ToolContext
    ) -> None:
        path = tmp_path / "shared" / "pdf" / "SKILL.md"
        with pytest.raises(ToolError, match="access denied"):
            await self.read(tool_ctx(tmp_path), path)
        assert "steps" in await self.read(ctx, path)  # the same path with the skill's root

    async def test_relative_paths_still_mean_the_workspace(self, ctx: ToolContext) -> None:
        with pytest.raises(ToolError, match="access denied"):
            await self.read(ctx, "../shared/pdf/SKILL.md")
