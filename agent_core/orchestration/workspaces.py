"""Where orchestrated runs work (agent-loop spec section 11, "Team Workspace Handling").

- :func:`team_workspace`: the folder a team shares: one for the whole team in shared mode, one
  per (team, chat) or (team, user) in isolated mode.
- :func:`resolve_run_workspace`: a run's default workspace (what relative paths mean), the
  extra roots its file tools may reach by absolute path, and its team workspace.
- :func:`prepare_delegation`: the ``delegations/<task id>/`` folder of a delegation, with the
  files passed along copied into ``inputs/`` and an empty ``outputs/``.

Every path returned is resolved and absolute.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_core.errors import ToolError
from agent_core.orchestration.records import Team, WorkspaceScope
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings
from agent_core.workspace import (
    WorkspaceEscape,
    resolve_inside,
    sanitize_user_id,
    user_workspace,
)

TEAMS_DIR = "_teams"  # never a user directory: sanitized user ids can't start with "_"
DELEGATIONS_DIR = "delegations"
INPUTS_DIR = "inputs"
OUTPUTS_DIR = "outputs"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 20


def team_workspace(base: Path, team: Team, *, chat_id: str, user_id: str) -> Path:
    """The team's workspace under ``base``.

    Shared mode: ``_teams/<team>/shared``. Isolated mode: ``_teams/<team>/chat/<chat id>`` or
    ``_teams/<team>/user/<user id>`` per ``team.settings.workspace_scope``; the chat scope
    falls back to the user when the run has no chat id. Every name is sanitized.
    """
    root = base / TEAMS_DIR / sanitize_user_id(team.id)
    if team.settings.shared_workspace:
        return (root / "shared").resolve()
    if team.settings.workspace_scope is WorkspaceScope.CHAT and chat_id:
        return (root / "chat" / sanitize_user_id(chat_id)).resolve()
    return (root / "user" / sanitize_user_id(user_id)).resolve()


@dataclass(frozen=True)
class RunWorkspace:
    default: Path  # what relative paths mean
    extra_roots: tuple[Path, ...]  # also reachable by absolute path
    team: Path | None  # the team workspace of this run (shown in the prompt), if any


def resolve_run_workspace(settings: AgentSettings, request: RunRequest) -> RunWorkspace:
    """A run's workspaces (section 11), without touching the disk beyond resolving paths.

    - ``request.workspace`` set (a dispatched team task or a delegation): it is the default,
      ``request.extra_roots`` the extra roots; the team workspace is the default only for a
      dispatched team task (``request.team_task_id`` set).
    - A team's lead: the team workspace is the default and its own user workspace an extra root
      (its main job is coordinating the team).
    - A team member: its own user workspace stays the default, the team workspace is an extra
      root.
    - Anyone else: its own user workspace, nothing more.
    """
    if request.workspace is not None:
        default = request.workspace.resolve()
        return RunWorkspace(
            default,
            tuple(r.resolve() for r in request.extra_roots),
            default if request.team_task_id is not None else None,
        )
    own = user_workspace(settings.workspace, request.user_id)
    team = settings.orchestration.team
    if team is None:
        return RunWorkspace(own, (), None)
    shared = team_workspace(
        settings.workspace, team, chat_id=request.chat_id, user_id=request.user_id
    )
    if settings.orchestration.is_lead(settings.id):
        return RunWorkspace(shared, (own,), shared)
    return RunWorkspace(own, (shared,), shared)


def prepare_delegation(
    parent_workspace: Path, task_id: str, files: Sequence[str], *, max_bytes: int
) -> Path:
    """Create ``delegations/<task id>/`` in ``parent_workspace`` with ``inputs/`` holding a copy
    of each of ``files`` (paths relative to ``parent_workspace``, copied under their base name)
    and an empty ``outputs/``; returns that folder.

    Synchronous and blocking (it copies files): call it with :func:`asyncio.to_thread`.

    Every file is checked before anything is created, and refused with a
    :class:`~agent_core.errors.ToolError` naming it when it is absolute, escapes the workspace,
    goes through a symbolic link, is missing or not a regular file, shares its base name with
    another one, or takes the total over ``max_bytes``.
    """
    root = parent_workspace.resolve()
    sources = _check_files(root, files, max_bytes)
    root.mkdir(parents=True, exist_ok=True)
    folder = _mkdir_nofollow(root, DELEGATIONS_DIR, sanitize_user_id(task_id))
    inputs = _mkdir_nofollow(folder, INPUTS_DIR)
    _mkdir_nofollow(folder, OUTPUTS_DIR)
    budget = max_bytes
    for relative, source in sources:
        budget -= _copy_nofollow(source, inputs / source.name, relative, budget)
    return folder


def _mkdir_nofollow(parent: Path, *parts: str) -> Path:
    """``parent/parts…``, creating each folder in turn and refusing one that is a link (a link
    planted at ``delegations/`` must not make us create folders outside the workspace)."""
    path = parent
    for part in parts:
        path = path / part
        with contextlib.suppress(FileExistsError):
            path.mkdir()
        if path.is_symlink() or not path.is_dir():
            raise ToolError("delegate", f"access denied: {path} is a symbolic link or not a folder")
    return path


def _check_files(root: Path, files: Sequence[str], max_bytes: int) -> list[tuple[str, Path]]:
    """``(path as given, resolved source)`` of every file to pass, in order."""
    sources: list[tuple[str, Path]] = []
    total = 0
    for relative in files:
        if not relative or os.path.isabs(relative):
            raise ToolError(
                "delegate", f"cannot pass {relative!r}: give a path relative to your workspace"
            )
        try:
            source = resolve_inside(root, relative)
        except WorkspaceEscape as exc:
            raise ToolError("delegate", f"cannot pass {relative!r}: access denied: {exc}") from exc
        if source.relative_to(root).as_posix() != Path(os.path.normpath(relative)).as_posix():
            raise ToolError(
                "delegate",
                f"cannot pass {relative!r}: it goes through a symbolic link or out of the "
                "workspace and back",
            )
        try:
            info = os.lstat(source)
        except FileNotFoundError:
            raise ToolError("delegate", f"cannot pass {relative!r}: no such file") from None
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(
                "delegate",
                f"cannot pass {relative!r}: not a regular file (pass files, not folders)",
            )
        name = source.name
        if any(name == seen.name for _, seen in sources):
            raise ToolError(
                "delegate",
                f"cannot pass {relative!r}: another file named {name!r} is passed already "
                "(inputs/ keeps base names only)",
            )
        total += info.st_size
        if total > max_bytes:
            raise ToolError(
                "delegate",
                f"cannot pass {relative!r}: the files passed would take {total} bytes, over the "
                f"limit of {max_bytes} bytes; pass fewer or smaller files",
            )
        sources.append((relative, source))
    return sources


def _copy_nofollow(source: Path, target: Path, relative: str, budget: int) -> int:
    """Copy without following a link at either end (one swapped in since the check), and no
    more than ``budget`` bytes (the file may have grown since). Returns the bytes copied."""
    try:
        src_fd = os.open(source, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        raise ToolError("delegate", f"cannot pass {relative!r}: {exc.strerror}") from exc
    with open(src_fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > budget:
            raise ToolError(
                "delegate", f"cannot pass {relative!r}: it changed while being passed; try again"
            )
        try:
            dst_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644)
        except OSError as exc:
            raise ToolError("delegate", f"cannot pass {relative!r}: {exc.strerror}") from exc
        copied = 0
        with open(dst_fd, "wb") as dst:
            while copied < info.st_size and (chunk := src.read(min(_CHUNK, budget - copied))):
                dst.write(chunk)
                copied += len(chunk)
    return copied
