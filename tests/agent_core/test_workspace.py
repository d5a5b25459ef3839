"""Workspaces: hostile user ids stay inside the base; bootstrap files are seeded exactly once,
also across processes; open vs predefined agents; truncation for the prompt."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from agent_core.bootstrap import (
    SEED_MARKER,
    STANDARD_FILES,
    AgentType,
    PromptMode,
    Workspaces,
    truncate_for_prompt,
)
from agent_core.workspace import (
    WorkspaceFull,
    sanitize_user_id,
    save_inbox_file,
    user_workspace,
)

HOSTILE = [
    "../../etc",
    "..",
    ".",
    "",
    "a/../../b",
    "/abs/path",
    "x\x00y",
    "\uff0e\uff0e\uff0fescape",  # full-width ../
    "\u2025/x",  # two-dot leader
    "..\\..\\win",
    "\u202eevil",
    "_agents",
    "a" * 500,
]


class TestHostileIds:
    @pytest.mark.parametrize("user_id", HOSTILE)
    def test_stays_a_direct_child_of_base(self, tmp_path: Path, user_id: str) -> None:
        ws = user_workspace(tmp_path, user_id)
        assert ws.parent == tmp_path.resolve()
        name = sanitize_user_id(user_id)
        assert "/" not in name and "\x00" not in name and name not in {"", ".", ".."}
        assert not name.startswith("_")  # can't collide with the agents' folder
        assert len(name) <= 80

    def test_distinct_ids_get_distinct_workspaces(self) -> None:
        names = {sanitize_user_id(u) for u in [*HOSTILE, "a/b", "a_b", "a:b"]}
        assert len(names) == len(HOSTILE) + 3


def _seed_in_process(base: str, user_id: str, queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put(Workspaces(Path(base), "main").ensure_user_files(user_id))


class TestSeeding:
    def test_open_agent_gets_all_standard_files_once(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        assert spaces.ensure_user_files("alice") == list(STANDARD_FILES)
        user = spaces.user_dir("alice")
        (user / "BOOTSTRAP.md").unlink()  # the first-run ritual is over
        (user / "SOUL.md").write_text("custom soul")
        fresh = Workspaces(tmp_path, "main")  # a restart: no in-process cache
        assert fresh.ensure_user_files("alice") == []
        assert not (user / "BOOTSTRAP.md").exists()
        assert (user / "SOUL.md").read_text() == "custom soul"

    def test_exactly_once_across_processes(self, tmp_path: Path) -> None:
        ctx = multiprocessing.get_context("spawn")
        queue: multiprocessing.Queue[list[str]] = ctx.Queue()
        procs = [
            ctx.Process(target=_seed_in_process, args=(str(tmp_path), "bob", queue))
            for _ in range(4)
        ]
        for p in procs:
            p.start()
        results = [queue.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
        created = sorted(name for r in results for name in r)
        assert created == sorted(STANDARD_FILES)  # each file created by exactly one process
        user = user_workspace(tmp_path, "bob")
        assert (user / SEED_MARKER).exists()
        assert not [p for p in user.iterdir() if p.name.endswith(".tmp")]

    def test_predefined_agent_has_agent_level_files_and_per_user_user_md(
        self, tmp_path: Path
    ) -> None:
        spaces = Workspaces(tmp_path, "support", AgentType.PREDEFINED)
        spaces.ensure_user_files("alice")
        spaces.ensure_user_files("bob")
        agent_dir = spaces.agent_dir()
        assert sorted(p.name for p in agent_dir.iterdir() if p.suffix == ".md") == [
            "AGENTS.md", "IDENTITY.md", "SOUL.md", "TOOLS.md",
        ]  # fmt: skip
        assert sorted(p.name for p in spaces.user_dir("bob").iterdir() if p.suffix == ".md") == [
            "USER.md"
        ]
        (agent_dir / "SOUL.md").write_text("the support persona")
        names = [f.name for f in spaces.context_files("alice")]
        assert names == ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"]
        soul = next(f for f in spaces.context_files("bob") if f.name == "SOUL.md")
        assert soul.content == "the support persona"

    def test_templates_folder_overrides_builtins(self, tmp_path: Path) -> None:
        templates = tmp_path / "tpl"
        templates.mkdir()
        (templates / "SOUL.md").write_text("pirate")
        spaces = Workspaces(tmp_path / "base", "main", templates_dir=templates)
        spaces.ensure_user_files("u")
        assert (spaces.user_dir("u") / "SOUL.md").read_text() == "pirate"


class TestContextFiles:
    def test_minimal_mode_only_agents_and_tools(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main")
        spaces.ensure_user_files("u")
        (spaces.user_dir("u") / "MEMORY.md").write_text("remember milk")
        full = [f.name for f in spaces.context_files("u", PromptMode.FULL)]
        assert full == [*STANDARD_FILES, "MEMORY.md"]
        assert [f.name for f in spaces.context_files("u", PromptMode.MINIMAL)] == [
            "AGENTS.md",
            "TOOLS.md",
        ]

    def test_long_files_are_truncated_with_a_marker(self, tmp_path: Path) -> None:
        spaces = Workspaces(tmp_path, "main", max_chars=1_000)
        spaces.ensure_user_files("u")
        (spaces.user_dir("u") / "MEMORY.md").write_text("H" * 5_000 + "T" * 5_000)
        memory = next(f for f in spaces.context_files("u") if f.name == "MEMORY.md")
        assert memory.truncated and len(memory.content) < 1_200
        assert memory.content.startswith("H" * 700) and memory.content.endswith("T" * 200)
        assert "truncated" in memory.content and "MEMORY.md" in memory.content

    def test_truncate_leaves_short_text_alone(self) -> None:
        assert truncate_for_prompt("A.md", "short", 100) == ("short", False)


class TestInboxFiles:
    def test_saved_under_inbox_with_a_safe_name(self, tmp_path: Path) -> None:
        path = save_inbox_file(tmp_path, "../../etc/pass wd.jpg", b"abc", 100)
        assert path == "inbox/etc_pass_wd.jpg"
        assert (tmp_path / path).read_bytes() == b"abc"

    def test_the_same_name_again_replaces_and_counts_once(self, tmp_path: Path) -> None:
        save_inbox_file(tmp_path, "p.jpg", b"x" * 60, 100)
        save_inbox_file(tmp_path, "p.jpg", b"y" * 60, 100)  # a replay: no double count
        assert (tmp_path / "inbox" / "p.jpg").read_bytes() == b"y" * 60

    def test_over_the_quota_nothing_is_written(self, tmp_path: Path) -> None:
        (tmp_path / "notes.md").write_bytes(b"n" * 80)
        with pytest.raises(WorkspaceFull, match=r"inbox/p\.jpg"):
            save_inbox_file(tmp_path, "p.jpg", b"x" * 30, 100)
        assert not (tmp_path / "inbox" / "p.jpg").exists()
