"""Bootstrap files: exclusive creation, prompt truncation, seeding and the files of a prompt.

Seeding across processes and hostile user ids are tested in tests/agent_core/test_workspace.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core import bootstrap
from agent_core.bootstrap import (
    AGENT_LEVEL_FILES,
    SEED_MARKER,
    STANDARD_FILES,
    TEMPLATES,
    USER_MD,
    AgentType,
    PromptMode,
    Workspaces,
    create_exclusive,
    truncate_for_prompt,
)
from agent_core.file_stamps import StampedCache


class RecordingLocks:
    """In-process SharedLocks that records what was locked; ``broken`` raises like an
    unreachable lock service."""

    def __init__(self, *, broken: bool = False) -> None:
        self.broken = broken
        self.held: set[str] = set()
        self.acquired: list[str] = []
        self.released: list[str] = []

    async def try_acquire(self, name: str) -> _Lease | None:
        if self.broken:
            raise ConnectionError("lock service down")
        if name in self.held:
            return None
        self.held.add(name)
        self.acquired.append(name)
        return _Lease(self, name)


class _Lease:
    def __init__(self, locks: RecordingLocks, name: str) -> None:
        self.locks, self.name = locks, name

    async def release(self) -> None:
        self.locks.held.discard(self.name)
        self.locks.released.append(self.name)


class TestCreateExclusive:
    def test_creates_once_and_keeps_the_first_content(self, tmp_path: Path) -> None:
        path = tmp_path / "deep" / "er" / "A.md"
        assert create_exclusive(path, "first")
        assert not create_exclusive(path, "second")
        assert path.read_text() == "first"
        assert sorted(p.name for p in path.parent.iterdir()) == ["A.md"]  # no temp files left


class TestTruncateForPrompt:
    def test_exactly_the_limit_is_kept(self) -> None:
        assert truncate_for_prompt("A.md", "x" * 50, 50) == ("x" * 50, False)

    @pytest.mark.parametrize("limit", [0, -1])
    def test_no_positive_limit_means_no_truncation(self, limit: int) -> None:
        assert truncate_for_prompt("A.md", "x" * 10_000, limit) == ("x" * 10_000, False)

    def test_marker_says_how_much_was_cut(self) -> None:
        text = "h" * 100 + "m" * 100 + "t" * 100
        content, cut = truncate_for_prompt("NOTES.md", text, 100)
        assert cut
        assert content.startswith("h" * 70) and content.endswith("t" * 20)
        assert "[... 210 of 300 characters of NOTES.md truncated" in content
        assert "mm" not in content  # the middle is cut


class TestTemplates:
    def test_missing_custom_template_falls_back_to_the_builtin(self, tmp_path: Path) -> None:
        templates = tmp_path / "tpl"
        templates.mkdir()
        (templates / "SOUL.md").write_text("custom soul")
        spaces = Workspaces(tmp_path / "base", "main", templates_dir=templates)
        assert spaces.template("SOUL.md") == "custom soul"
        assert spaces.template("AGENTS.md") == TEMPLATES["AGENTS.md"]

    def test_every_standard_file_has_a_template(self) -> None:
        assert set(STANDARD_FILES) <= set(TEMPLATES)
        assert all(TEMPLATES[name].strip() for name in STANDARD_FILES)


class TestSeeding:
    def test_agent_type_from_text(self, tmp_path: Path) -> None:
        assert Workspaces(tmp_path, "a", "predefined").agent_type is AgentType.PREDEFINED
        with pytest.raises(ValueError):
            Workspaces(tmp_path, "a", "closed")

    def test_seeded_files_hold_the_templates(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.ensure_user_files("alice")
        user = spaces.user_dir("alice")
        for name in STANDARD_FILES:
            assert (user / name).read_text(encoding="utf-8") == TEMPLATES[name]
        assert (user / SEED_MARKER).exists()

    def test_an_existing_file_is_not_overwritten(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        user = spaces.user_dir("alice")
        user.mkdir(parents=True)
        (user / "SOUL.md").write_text("mine")
        created = spaces.ensure_user_files("alice")
        assert "SOUL.md" not in created
        assert sorted(created) == sorted(set(STANDARD_FILES) - {"SOUL.md"})
        assert (user / "SOUL.md").read_text() == "mine"

    def test_a_marked_workspace_is_not_seeded(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        user = spaces.user_dir("bob")
        user.mkdir(parents=True)
        (user / SEED_MARKER).touch()
        assert spaces.ensure_user_files("bob") == []
        assert [p.name for p in user.iterdir()] == [SEED_MARKER]

    def test_predefined_agent_files_are_seeded_once_for_all_users(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "support", AgentType.PREDEFINED)
        assert spaces.ensure_user_files("alice") == [*AGENT_LEVEL_FILES, USER_MD]
        assert spaces.ensure_user_files("bob") == [USER_MD]
        assert spaces.ensure_user_files("bob") == []

    def test_the_seeded_cache_forgets_the_oldest_and_a_forgotten_one_is_not_reseeded(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(bootstrap, "SEEDED_REMEMBERED", 2)
        spaces = Workspaces(tmp_path, "main")
        for user in ("alice", "bob", "carol"):
            spaces.ensure_user_files(user)
        remembered = spaces._seeded
        assert list(remembered) == [spaces.user_dir("bob"), spaces.user_dir("carol")]
        (spaces.user_dir("alice") / "SOUL.md").write_text("edited since")
        assert spaces.ensure_user_files("alice") == []  # checked on disk again: marked
        assert (spaces.user_dir("alice") / "SOUL.md").read_text() == "edited since"

    async def test_prepare_without_locks(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        assert await spaces.prepare_user_files("alice") == list(STANDARD_FILES)
        assert await spaces.prepare_user_files("alice") == []
        assert (spaces.user_dir("alice") / "AGENTS.md").exists()

    async def test_prepare_seeds_under_a_shared_lock(self, tmp_path: Path) -> None:
        locks = RecordingLocks()
        spaces = Workspaces(tmp_path, "main", locks=locks)
        assert await spaces.prepare_user_files("alice") == list(STANDARD_FILES)
        assert len(locks.acquired) == 1 and locks.acquired[0].startswith("seed:")
        assert locks.released == locks.acquired and not locks.held
        assert await spaces.prepare_user_files("alice") == []  # seen seeded: no lock again
        assert len(locks.acquired) == 1
        await spaces.prepare_user_files("bob")
        assert len(set(locks.acquired)) == 2  # one lock per workspace

    @pytest.mark.parametrize("kind", [AgentType.OPEN, AgentType.PREDEFINED])
    async def test_a_workspace_another_process_seeded_takes_no_lock(
        self, tmp_path: Path, kind: AgentType
    ) -> None:
        await Workspaces(tmp_path, "main", kind).prepare_user_files("alice")  # the other one
        locks = RecordingLocks()
        spaces = Workspaces(tmp_path, "main", kind, locks=locks)
        assert await spaces.prepare_user_files("alice") == []
        assert locks.acquired == []
        assert spaces.user_dir("alice") in spaces._seeded  # not even a stat next time

    async def test_a_half_seeded_predefined_agent_is_seeded_under_the_lock(
        self, tmp_path: Path
    ) -> None:
        Workspaces(tmp_path, "main", AgentType.PREDEFINED).ensure_user_files("alice")
        (Workspaces(tmp_path, "main").agent_dir() / SEED_MARKER).unlink()  # agent folder undone
        locks = RecordingLocks()
        spaces = Workspaces(tmp_path, "main", AgentType.PREDEFINED, locks=locks)
        await spaces.prepare_user_files("alice")
        assert len(locks.acquired) == 1
        assert (spaces.agent_dir() / SEED_MARKER).exists()

    async def test_prepare_goes_ahead_when_the_lock_service_is_down(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main", locks=RecordingLocks(broken=True))
        assert await spaces.prepare_user_files("alice") == list(STANDARD_FILES)


class TestContextFiles:
    def test_empty_and_missing_files_are_skipped(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.ensure_user_files("u")
        user = spaces.user_dir("u")
        (user / "SOUL.md").write_text("  \n\t")
        (user / "BOOTSTRAP.md").unlink()
        (user / "MEMORY.md").mkdir()  # a folder, not a file
        names = [f.name for f in spaces.context_files("u")]
        assert names == ["AGENTS.md", "TOOLS.md", "IDENTITY.md", "USER.md"]

    def test_files_carry_path_and_content(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.ensure_user_files("u")
        [agents, tools] = spaces.context_files("u", "minimal")
        assert agents.path == spaces.user_dir("u") / "AGENTS.md"
        assert agents.content == TEMPLATES["AGENTS.md"] and not agents.truncated
        assert tools.name == "TOOLS.md"

    def test_a_user_without_files_has_none(self, tmp_path: Path) -> None:
        assert Workspaces(tmp_path, "main").context_files("nobody", PromptMode.FULL) == []

    async def test_prompt_inputs_reads_files_and_skills(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.ensure_user_files("u")
        workspace = spaces.user_dir("u")
        skill = workspace / "skills" / "greet"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: greet\ndescription: say hello nicely\n---\nSay hello.\n"
        )
        files, skills = await spaces.load_prompt_inputs("u", PromptMode.MINIMAL, workspace, ())
        assert [f.name for f in files] == ["AGENTS.md", "TOOLS.md"]
        assert [s.name for s in skills] == ["greet"]


class TestKeptPromptInputs:
    """``load_prompt_inputs``: a run's files from memory while their stats hold."""

    @pytest.fixture
    def spaces(self, tmp_path: Path) -> Workspaces:
        spaces = Workspaces(tmp_path / "ws", "main")
        spaces.ensure_user_files("u")
        spaces.kept_inputs = StampedCache(100, 100_000, settle_ns=0)  # trust every stamp
        return spaces

    @pytest.fixture
    def reads(self, spaces: Workspaces, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
        """The workspaces whose files were read from disk."""
        reads: list[Path] = []
        read = spaces._read_prompt_inputs

        def counted(where: Any, workspace: Path, skill_paths: Any) -> Any:
            reads.append(workspace)
            return read(where, workspace, skill_paths)

        monkeypatch.setattr(spaces, "_read_prompt_inputs", counted)
        return reads

    async def load(self, spaces: Workspaces, shared: tuple[Path, ...] = ()) -> tuple[Any, Any]:
        files, skills = await spaces.load_prompt_inputs(
            "u", PromptMode.FULL, spaces.user_dir("u"), shared
        )
        return {f.name: f.content for f in files}, [s.name for s in skills]

    async def test_an_unchanged_workspace_is_read_once(
        self, spaces: Workspaces, reads: list[Path]
    ) -> None:
        first = await self.load(spaces)
        assert await self.load(spaces) == first
        assert "USER.md" in first[0]
        assert reads == [spaces.user_dir("u")]

    async def test_edited_created_and_deleted_files_are_read_again(
        self, spaces: Workspaces
    ) -> None:
        await self.load(spaces)
        user = spaces.user_dir("u")
        (user / USER_MD).write_text("# USER.md\n\n- Name: Ann, who likes long answers\n")
        (user / "MEMORY.md").write_text("Ann's birthday: 4 May\n")
        (user / "BOOTSTRAP.md").unlink()
        files, _ = await self.load(spaces)
        assert "Ann, who likes" in files[USER_MD]
        assert files["MEMORY.md"] == "Ann's birthday: 4 May\n"
        assert "BOOTSTRAP.md" not in files

    async def test_skills_added_in_the_workspace_or_a_shared_folder_are_seen(
        self, spaces: Workspaces, tmp_path: Path
    ) -> None:
        folder = spaces.user_dir("u") / "skills" / "greet"
        folder.mkdir(parents=True)  # no SKILL.md yet: not a skill
        shared = tmp_path / "shared"
        shared.mkdir()
        assert (await self.load(spaces, (shared,)))[1] == []
        (folder / "SKILL.md").write_text("---\nname: greet\ndescription: say hello\n---\n")
        assert (await self.load(spaces, (shared,)))[1] == ["greet"]
        (shared / "wave.md").write_text("---\nname: wave\ndescription: wave back\n---\n")
        assert (await self.load(spaces, (shared,)))[1] == ["greet", "wave"]

    async def test_files_changed_just_before_are_read_every_time(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.kept_inputs = StampedCache(100, 100_000, settle_ns=60_000_000_000)
        spaces.ensure_user_files("u")
        for _ in range(2):
            await spaces.load_prompt_inputs("u", PromptMode.FULL, spaces.user_dir("u"), ())
        assert len(spaces.kept_inputs) == 0

    async def test_a_caller_cannot_change_what_is_kept(self, spaces: Workspaces) -> None:
        files, _ = await spaces.load_prompt_inputs(
            "u", PromptMode.MINIMAL, spaces.user_dir("u"), ()
        )
        files.clear()
        again, _ = await spaces.load_prompt_inputs(
            "u", PromptMode.MINIMAL, spaces.user_dir("u"), ()
        )
        assert [f.name for f in again] == ["AGENTS.md", "TOOLS.md"]

    async def test_kept_files_are_those_a_read_gives(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main", AgentType.PREDEFINED)  # files in two folders
        spaces.ensure_user_files("u")
        spaces.kept_inputs = StampedCache(100, 100_000, settle_ns=0)
        read = (spaces.context_files("u", PromptMode.FULL), ())
        for _ in range(2):
            got = await spaces.load_prompt_inputs("u", PromptMode.FULL, spaces.user_dir("u"), ())
            assert got == read
        assert len(spaces.kept_inputs) == 1
