"""Skills in the Agent Skills format: a folder with a ``SKILL.md`` that starts with YAML front
matter (``name``, ``description``), next to the files the skill's instructions refer to.

A workspace's ``skills/`` folder and the shared skill folders (``AgentSettings.skill_paths``)
hold them; a flat ``skills/<name>.md`` is a skill too (the older layout). The prompt lists
their names and descriptions (or ``skill_search`` finds them); the model reads a skill's file
with ``read_file`` when it needs it. A shared skill's folder is readable by absolute path but
never writable (``tools/files.py``).

A run's skills are kept with its context files while the stats of :func:`skill_stamp_paths`
hold (``Workspaces.load_prompt_inputs``); when discovery runs again, parsed files are cached
by their stat too, so it only lists the skill roots and stats each skill file.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml

from agent_core.file_stamps import trusted
from agent_core.workspace import is_inside, read_head

log = structlog.get_logger(__name__)

SKILLS_DIR = "skills"  # a workspace's own skills
SKILL_FILE = "SKILL.md"
DESCRIPTION_MAX_CHARS = 300  # one prompt line per skill: a long description crowds out others
NAME_MAX_CHARS = 64  # the Agent Skills limit
_HEAD_CHARS = 64 * 1024  # front matter and the first lines are at the top
_CACHE_MAX = 4096


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path  # the file to read (SKILL.md or the flat .md), resolved
    folder: Path  # the skill's folder; for a flat file, the file itself
    shared: bool  # from a shared skill path, not the workspace


def discover_skills(workspace: Path, shared_paths: Sequence[Path] = ()) -> tuple[Skill, ...]:
    """The skills of ``<workspace>/skills/`` and of each shared path, sorted by name.

    A workspace skill shadows a shared one of the same name, an earlier shared path a later
    one. Entries (folders, files, ``SKILL.md``) that are links leading out of their root are
    ignored: the model could not read them anyway. A ``README.md`` describes a collection of
    skills; it is not one.
    """
    found: dict[str, Skill] = {}
    home = workspace.resolve()
    local = home / SKILLS_DIR
    if not local.is_symlink() or _follow(home, local) is not None:  # else it's unreachable
        for skill in _scan(local, shared=False):
            found.setdefault(skill.name, skill)
    for root in shared_paths:
        for skill in _scan(root, shared=True):
            found.setdefault(skill.name, skill)
    return tuple(sorted(found.values(), key=lambda s: (s.name.lower(), s.name)))


def skill_stamp_paths(workspace: Path, shared_paths: Sequence[Path] = ()) -> list[Path]:
    """The paths whose stats change whenever :func:`discover_skills`' answer may: each skill
    root (an entry added or removed), each folder's ``SKILL.md`` (present or not) and every
    other entry. Stats follow links, as discovery does."""
    paths: list[Path] = []
    for root in (workspace / SKILLS_DIR, *shared_paths):
        paths.append(root)
        try:
            with os.scandir(root) as it:
                entries = [e for e in it if not e.name.startswith(".")]
        except (OSError, ValueError):
            continue
        for entry in entries:
            path = root / entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            paths.append(path / SKILL_FILE if is_dir else path)
    return paths


def skill_location(skill: Skill, workspace: Path) -> str:
    """The path the model passes to read_file: relative for a workspace skill (relative paths
    mean the workspace), absolute for a shared one."""
    if not skill.shared:
        try:
            return skill.path.relative_to(workspace.resolve()).as_posix()
        except ValueError:
            pass  # the workspace moved under us: the absolute path still reads
    return str(skill.path)


def shared_folders(skills: Sequence[Skill]) -> tuple[Path, ...]:
    """The folders of the shared skills: what file tools may read (not write) beyond the
    workspace."""
    return tuple(s.folder for s in skills if s.shared)


def _scan(root: Path, *, shared: bool) -> list[Skill]:
    try:
        base = root.resolve(strict=True)
        with os.scandir(base) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except (OSError, RuntimeError):
        return []  # no skills there (yet): not worth a warning on every run
    folders: list[Skill] = []
    flats: list[Skill] = []
    for entry in entries:
        path = base / entry.name
        try:
            if entry.is_symlink():  # only links pay for a resolve: the rest stays inside
                followed = _follow(base, path)
                if followed is None:
                    continue
                path, is_dir = followed, followed.is_dir()
            else:
                is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue  # removed while scanning
        if is_dir:
            skill = _folder_skill(entry.name, path, shared)
            if skill is not None:
                folders.append(skill)
        elif entry.name.endswith(".md") and entry.name.lower() != "readme.md":
            flat = _parse(path, None, fallback_name=entry.name[:-3], front_matter_required=False)
            if flat is not None:
                flats.append(Skill(flat[0], flat[1], path, path, shared))
    return folders + flats  # a folder skill wins over a flat file of the same name


def _folder_skill(name: str, folder: Path, shared: bool) -> Skill | None:
    path = folder / SKILL_FILE
    try:
        st = os.lstat(path)
    except OSError:
        return None  # a folder without SKILL.md: assets, notes, something else
    known: os.stat_result | None = st
    if stat.S_ISLNK(st.st_mode):
        followed = _follow(folder, path)
        if followed is None:
            return None
        path, known = followed, None
    parsed = _parse(path, known, fallback_name=name, front_matter_required=True)
    return Skill(parsed[0], parsed[1], path, folder, shared) if parsed else None


def _follow(parent: Path, link: Path) -> Path | None:
    """Where ``link`` (an entry of the resolved ``parent``) leads, or ``None`` when that is not
    inside ``parent``: the model could not read it there."""
    try:
        target = link.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        _warn_once("skills.bad_link", link, link)
        return None
    if is_inside(parent, target) and target != parent:
        return target
    _warn_once("skills.outside_root", link, target)
    return None


_warned: set[tuple[str, Path, Path]] = set()


def _warn_once(event: str, path: Path, target: Path) -> None:
    """Discovery runs on every run: a bad link is worth one warning per process, not one per
    message."""
    if (event, path, target) in _warned:
        return
    if len(_warned) < _CACHE_MAX:
        _warned.add((event, path, target))
    log.warning(event, path=str(path), target=str(target))


# (file, name to fall back on) → (its stat when parsed, what was parsed)
_cache: dict[tuple[Path, str], tuple[tuple[int, int, int, int], tuple[str, str] | None]] = {}
_cache_lock = threading.Lock()  # runs discover in worker threads, concurrently


def _parse(
    path: Path, st: os.stat_result | None, *, fallback_name: str, front_matter_required: bool
) -> tuple[str, str] | None:
    """``(name, description)`` of a skill file (``st``: its stat if known), or ``None`` when it
    is not a readable regular file."""
    try:
        st = st or os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
    with _cache_lock:
        cached = _cache.get((path, fallback_name))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        text = read_head(path, _HEAD_CHARS).text  # O_NOFOLLOW: a link swapped in is refused
    except OSError as exc:
        log.warning("skills.unreadable", path=str(path), error=exc.strerror)
        parsed = None
    else:
        parsed = _name_and_description(text, path, fallback_name, front_matter_required)
    if not trusted(st.st_ctime_ns, time.time_ns()):
        return parsed  # changed just now: a rewrite in the same tick would keep the stamp
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()  # many stale versions: start over rather than track ages
        _cache[path, fallback_name] = (stamp, parsed)
    return parsed


def _name_and_description(
    text: str, path: Path, fallback_name: str, front_matter_required: bool
) -> tuple[str, str]:
    meta, body, problem = _front_matter(text.removeprefix("\ufeff"))
    name = _one_line(meta.get("name"), NAME_MAX_CHARS)
    description = _one_line(meta.get("description"), DESCRIPTION_MAX_CHARS)
    if problem is None and (not name or not description):
        problem = "name and description (non-empty strings) are required"
    if problem is not None and (front_matter_required or meta or problem != "missing"):
        log.warning("skills.bad_front_matter", path=str(path), problem=problem)
    return name or fallback_name, description or _first_line(body)


def _front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """``(metadata, body, problem)``: problem is ``None``, ``"missing"`` or what is wrong."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text, "missing"
    end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() in ("---", "...")), None)
    if end is None:
        return {}, text, "front matter is not closed by ---"
    body = "".join(lines[end + 1 :])
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        return {}, body, f"invalid YAML: {str(exc)[:200]}"
    if not isinstance(meta, dict):
        return {}, body, "front matter is not a mapping"
    return meta, body, None


def _one_line(value: object, cap: int) -> str:
    text = " ".join(value.split()) if isinstance(value, str) else ""
    return text if len(text) <= cap else text[: cap - 1].rstrip() + "…"


def _first_line(body: str) -> str:
    for line in body.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped != "---":
            return _one_line(stripped, DESCRIPTION_MAX_CHARS)
    return ""
