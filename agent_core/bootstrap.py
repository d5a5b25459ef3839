"""Bootstrap files: the workspace markdown that shapes an agent, seeded from templates.

Agent types (spec section 10):

- ``open``: every user gets their own copy of all standard files in their workspace, seeded from
  templates on their first chat;
- ``predefined``: AGENTS.md, SOUL.md, TOOLS.md and IDENTITY.md live once at agent level
  (``<base>/_agents/<agent id>``); each user only gets a USER.md.

Seeding happens exactly once per workspace, also when several processes race: every file is
created with a hard link from a private temporary file (``os.link`` fails if the name exists,
and the file appears complete or not at all), and a marker file records that seeding is done, so
a file the agent deleted on purpose (BOOTSTRAP.md after the first-run ritual) never comes back.
One gap remains between processes: one that found no marker, then stalled, could still create
a file after another finished seeding and the agent deleted it. With several processes
(:class:`~agent_core.locks.SharedLocks`), :meth:`Workspaces.prepare_user_files` closes it by
seeding a workspace under a lock shared by all of them.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import os
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent_core.file_stamps import Stamp, StampedCache, stamp
from agent_core.locks import Lease, SharedLocks, acquire_waiting
from agent_core.skills import Skill, discover_skills, skill_stamp_paths
from agent_core.workspace import agent_workspace, user_workspace

log = structlog.get_logger(__name__)

SEEDED_REMEMBERED = 1_024
"""Workspace directories this process remembers as seeded (the oldest is forgotten first)."""

AGENTS_MD = "AGENTS.md"
SOUL_MD = "SOUL.md"
TOOLS_MD = "TOOLS.md"
IDENTITY_MD = "IDENTITY.md"
USER_MD = "USER.md"
BOOTSTRAP_MD = "BOOTSTRAP.md"
MEMORY_MD = "MEMORY.md"
STANDARD_FILES = (AGENTS_MD, SOUL_MD, TOOLS_MD, IDENTITY_MD, USER_MD, BOOTSTRAP_MD)
EXTRA_FILES = (MEMORY_MD, "USER_PREDEFINED.md", "DELEGATION.md", "TEAM.md", "AVAILABILITY.md")
MINIMAL_FILES = (AGENTS_MD, TOOLS_MD)
AGENT_LEVEL_FILES = (AGENTS_MD, SOUL_MD, TOOLS_MD, IDENTITY_MD)
SEED_MARKER = ".loopgate-seeded"
CONTEXT_FILE_MAX_CHARS = 20_000
PROMPT_INPUTS_KEPT = 1_024
"""Runs' prompt inputs (per user, mode and workspace) kept in memory, the least recent dropped
first; also at most ``PROMPT_INPUTS_KEPT_CHARS`` characters of files in all."""
PROMPT_INPUTS_KEPT_CHARS = 4_000_000
SEED_LOCK_WAIT = 10.0
"""How long a process waits for another one seeding the same workspace; seeding is safe
without the lock (see above), so after that it goes ahead."""

TEMPLATES: dict[str, str] = {
    AGENTS_MD: (
        "# AGENTS.md - how you work\n\n"
        "- Answer the user's question first; keep answers short unless asked for detail.\n"
        "- Use your tools when they help and say what you did.\n"
        "- Write what you must remember to MEMORY.md or memory/YYYY-MM-DD.md: you forget "
        "everything else between sessions.\n"
    ),
    SOUL_MD: (
        "# SOUL.md - who you are\n\n"
        "Helpful, direct and honest. Friendly without flattery. Admit what you don't know.\n"
    ),
    TOOLS_MD: (
        "# TOOLS.md - notes about your tools\n\n"
        "Files you write stay in your workspace. Keep notes here about how tools behave.\n"
    ),
    IDENTITY_MD: "# IDENTITY.md\n\n- Name: (choose one with the user)\n- Style: concise\n",
    USER_MD: ("# USER.md - about the user\n\n- Name:\n- Preferred language:\n- Notes:\n"),
    BOOTSTRAP_MD: (
        "# BOOTSTRAP.md - first run\n\n"
        "This is your first conversation with this user. Greet them, ask their name and how "
        "they want you to help, and record the answers in USER.md (and your chosen name in "
        "IDENTITY.md). When done, overwrite BOOTSTRAP.md with an empty file so this ritual "
        "does not repeat.\n"
    ),
}


class AgentType(enum.StrEnum):
    OPEN = "open"  # per-user files, all seeded from templates
    PREDEFINED = "predefined"  # agent-level files plus a per-user USER.md


class PromptMode(enum.StrEnum):
    FULL = "full"  # main runs
    MINIMAL = "minimal"  # sub-agents, cron, memory flush: AGENTS.md and TOOLS.md only


@dataclass(frozen=True, slots=True)
class ContextFile:
    name: str
    content: str  # possibly truncated for the prompt
    path: Path
    truncated: bool = False


PromptInputs = tuple[list[ContextFile], tuple[Skill, ...]]
PromptInputsKey = tuple[str, PromptMode, str, tuple[Path, ...]]


@dataclass(frozen=True, slots=True)
class _KeptInputs:
    """A run's prompt inputs as kept between runs: no paths (rebuilt when used), so that a
    user costs little more than their files' text."""

    texts: tuple[tuple[str, str, bool], ...]  # each file's name, content, truncated
    skills: tuple[Skill, ...]
    skill_stamps: tuple[str, ...]  # skill_stamp_paths, as stamped


def create_exclusive(path: Path, content: str) -> bool:
    """Create ``path`` with ``content`` unless it exists; atomic and race-free across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(content, encoding="utf-8")
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def truncate_for_prompt(name: str, text: str, max_chars: int) -> tuple[str, bool]:
    """Keep the head (70%) and tail (20%) of a long file with a marker saying what was cut."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text, False
    head, tail = int(max_chars * 0.7), int(max_chars * 0.2)
    omitted = len(text) - head - tail
    marker = (
        f"\n\n[... {omitted} of {len(text)} characters of {name} truncated; "
        f"use read_file to see all of it ...]\n\n"
    )
    return text[:head] + marker + (text[-tail:] if tail else ""), True


class Workspaces:
    """One agent's workspaces: resolution, first-chat seeding, context files for the prompt."""

    def __init__(
        self,
        base: Path,
        agent_id: str,
        agent_type: AgentType | str = AgentType.OPEN,
        *,
        templates_dir: Path | None = None,
        max_chars: int = CONTEXT_FILE_MAX_CHARS,
        locks: SharedLocks | None = None,
    ) -> None:
        self.base = base
        self.locks = locks
        self.agent_id = agent_id
        self.agent_type = AgentType(agent_type)
        self.templates_dir = templates_dir
        self.max_chars = max_chars
        # In-process cache, so the disk check runs once per directory; bounded, because a
        # directory it forgot costs one more check, while one entry per user ever seen would
        # grow with the bot's audience.
        self._seeded: dict[Path, None] = {}
        self._lock = threading.Lock()
        self.kept_inputs: StampedCache[PromptInputsKey, _KeptInputs] = StampedCache(
            PROMPT_INPUTS_KEPT, PROMPT_INPUTS_KEPT_CHARS
        )

    def user_dir(self, user_id: str) -> Path:
        return user_workspace(self.base, user_id)

    def agent_dir(self) -> Path:
        return agent_workspace(self.base, self.agent_id)

    def template(self, name: str) -> str:
        if self.templates_dir is not None:
            custom = self.templates_dir / name
            if custom.is_file():
                return custom.read_text(encoding="utf-8")
        return TEMPLATES[name]

    def ensure_user_files(self, user_id: str) -> list[str]:
        """Seed the user's (and for predefined agents the agent's) files; returns files created."""
        created: list[str] = []
        if self.agent_type is AgentType.PREDEFINED:
            created += self._seed(self.agent_dir(), AGENT_LEVEL_FILES)
            created += self._seed(self.user_dir(user_id), (USER_MD,))
        else:
            created += self._seed(self.user_dir(user_id), STANDARD_FILES)
        return created

    async def prepare_user_files(self, user_id: str) -> list[str]:
        """:meth:`ensure_user_files` off the event loop; with shared locks, under the
        workspace's lock until this process has seen it seeded."""
        user_dir = self.user_dir(user_id)
        with self._lock:
            done = user_dir in self._seeded  # seeded last, so the agent's files are done too
        if done:
            return []  # as ensure_user_files would say, without a thread hop on every run
        if self._marked(user_dir):
            return []  # seeded before, here or by another process: no lock, no thread hop
        if self.locks is None:
            return await asyncio.to_thread(self.ensure_user_files, user_id)
        name = "seed:" + hashlib.sha256(str(user_dir).encode()).hexdigest()[:24]
        lease: Lease | None = None
        try:
            lease = await acquire_waiting(self.locks, name, patience=SEED_LOCK_WAIT)
        except Exception as exc:
            log.warning("workspace.seed_lock_unavailable", error=repr(exc))
        if lease is None:
            log.info("workspace.seeding_unlocked", directory=str(user_dir))
        try:
            return await asyncio.to_thread(self.ensure_user_files, user_id)
        finally:
            if lease is not None:
                await lease.release()

    def _marked(self, user_dir: Path) -> bool:
        """Whether seeding finished for the user (and the agent's folder): a stat each, on
        the event loop. The marker is written last, so nothing would be created."""
        folders = [user_dir]
        if self.agent_type is AgentType.PREDEFINED:
            folders.append(self.agent_dir())
        if not all(os.path.exists(folder / SEED_MARKER) for folder in folders):
            return False
        for folder in folders:
            self._remember(folder)
        return True

    def _remember(self, directory: Path) -> None:
        with self._lock:
            self._seeded[directory] = None
            if len(self._seeded) > SEEDED_REMEMBERED:
                del self._seeded[next(iter(self._seeded))]

    def _seed(self, directory: Path, names: Iterable[str]) -> list[str]:
        with self._lock:
            if directory in self._seeded:
                return []
        directory.mkdir(parents=True, exist_ok=True)
        created: list[str] = []
        if not (directory / SEED_MARKER).exists():
            created = [n for n in names if create_exclusive(directory / n, self.template(n))]
            create_exclusive(directory / SEED_MARKER, "")
            if created:
                log.info("workspace.seeded", directory=str(directory), files=created)
        self._remember(directory)
        return created

    async def load_prompt_inputs(
        self, user_id: str, mode: PromptMode, workspace: Path, skill_paths: Sequence[Path]
    ) -> PromptInputs:
        """A run's context files (:meth:`context_files`) and skills: from memory while a stat
        of each file they came from (on the event loop) finds nothing changed, else read again
        in a worker thread."""
        mode = PromptMode(mode)
        key = (user_id, mode, str(workspace), tuple(skill_paths))
        where = self.context_paths(user_id, mode)

        def stamped(kept: _KeptInputs) -> Iterator[str]:
            yield from (str(path) for _, path in where)
            yield from kept.skill_stamps

        kept = self.kept_inputs.get(key, stamped)
        if kept is not None:
            paths = dict(where)
            files = [ContextFile(name, text, paths[name], cut) for name, text, cut in kept.texts]
            return files, kept.skills
        taken, read, inputs = await asyncio.to_thread(
            self._read_prompt_inputs, where, workspace, key[3]
        )
        size = sum(len(text) for _, text, _ in read.texts) + 100 * len(read.skill_stamps)
        self.kept_inputs.put(key, read, taken, size=size)
        return inputs

    def _read_prompt_inputs(
        self, where: list[tuple[str, Path]], workspace: Path, skill_paths: Sequence[Path]
    ) -> tuple[Stamp, _KeptInputs, PromptInputs]:
        """The files at ``where`` and the skills, stamped first: file reads, for one thread
        hop."""
        skill_stamps = tuple(map(str, skill_stamp_paths(workspace, skill_paths)))
        taken = stamp([*(str(path) for _, path in where), *skill_stamps])
        files, skills = self._read_files(where), discover_skills(workspace, skill_paths)
        # Interned: the files seeded from the same templates are one string for all users.
        texts = tuple((f.name, sys.intern(f.content), f.truncated) for f in files)
        return taken, _KeptInputs(texts, skills, skill_stamps), (files, skills)

    def context_paths(
        self, user_id: str, mode: PromptMode | str = PromptMode.FULL
    ) -> list[tuple[str, Path]]:
        """Where each file the prompt may show is, by name, in the prompt's order."""
        wanted = (
            MINIMAL_FILES
            if PromptMode(mode) is PromptMode.MINIMAL
            else STANDARD_FILES + EXTRA_FILES
        )
        user = self.user_dir(user_id)
        agent = self.agent_dir() if self.agent_type is AgentType.PREDEFINED else None
        return [
            (name, (agent if agent is not None and name in AGENT_LEVEL_FILES else user) / name)
            for name in wanted
        ]

    def context_files(
        self, user_id: str, mode: PromptMode | str = PromptMode.FULL
    ) -> list[ContextFile]:
        """The files for the prompt, in a stable order; empty or missing files are skipped."""
        return self._read_files(self.context_paths(user_id, mode))

    def _read_files(self, where: list[tuple[str, Path]]) -> list[ContextFile]:
        files: list[ContextFile] = []
        for name, path in where:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
            if not text.strip():
                continue
            content, cut = truncate_for_prompt(name, text, self.max_chars)
            files.append(ContextFile(name, content, path, cut))
        return files
