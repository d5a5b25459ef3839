"""Per-user workspaces and the one rule every file tool obeys: never leave the workspace."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from agent_core.errors import AgentError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


class WorkspaceEscape(AgentError, ValueError):
    """A path that would resolve outside the workspace."""


def sanitize_user_id(user_id: str) -> str:
    """A directory name for a user id that can't contain separators, dots-only names or NULs.

    Unicode is folded (NFKC) first so look-alike slashes and dots can't sneak through; the
    result keeps a short hash of the original id so distinct ids never share a workspace.
    """
    folded = unicodedata.normalize("NFKC", user_id)
    safe = _UNSAFE.sub("_", folded).strip("._")[:64]
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if safe and safe == user_id:
        return safe  # plain ids (the common case) stay readable
    return f"{safe or 'user'}-{digest}"


@lru_cache(maxsize=1024)
def user_workspace(base: Path, user_id: str) -> Path:
    # Cached: asked several times per run, and resolving walks the path with a syscall per
    # part. File tools still resolve every path they touch (resolve_inside), root included.
    # The chats of the moment fit; an entry is ~0.6 KiB, so 4,096 held 2.5 MiB of a busy
    # process's 100 MiB budget.
    return (base / sanitize_user_id(user_id)).resolve()


def resolve_inside(workspace: Path, relative: str) -> Path:
    """Resolve ``relative`` inside ``workspace`` or raise :class:`WorkspaceEscape`.

    Symlinks are resolved before the check, so a link pointing outside is refused too.
    """
    if "\x00" in relative:
        raise WorkspaceEscape("path contains a NUL byte")
    root = workspace.resolve()
    # Non-strict resolve() follows every link, dangling ones too: a link to a path outside that
    # does not exist yet resolves to that outside path and is refused like any other.
    candidate = (root / relative).resolve()
    if not is_inside(root, candidate):
        raise WorkspaceEscape(f"path {relative!r} is outside the workspace")
    return candidate


def resolve_in_roots(default: Path, extra_roots: Sequence[Path], path: str) -> tuple[Path, Path]:
    """``(root, target)`` for a file tool's ``path``, or raise :class:`WorkspaceEscape`.

    A relative path always means ``default`` (exactly :func:`resolve_inside`). An absolute path
    is allowed when it resolves (symlinks followed) inside ``default`` or one of
    ``extra_roots``; ``root`` is the first of them, ``default`` first, that contains it, so the
    same file gets the same root whichever way it is named. Both are resolved.
    """
    if "\x00" in path:
        raise WorkspaceEscape("path contains a NUL byte")
    root = default.resolve()
    if not os.path.isabs(path):
        return root, resolve_inside(root, path)
    candidate = Path(path).resolve()
    extra = [r.resolve() for r in extra_roots]
    for allowed in (root, *extra):
        if is_inside(allowed, candidate):
            return allowed, candidate
    others = "".join(f", {r}" for r in extra)
    raise WorkspaceEscape(
        f"path {path!r} is outside the workspace (absolute paths must be inside {root}{others})"
    )


def is_inside(root: Path, path: Path) -> bool:
    """``path`` is ``root`` or below it (both already resolved)."""
    return path == root or root in path.parents


# A link planted between the check and the open must not be followed: O_NOFOLLOW makes the
# open fail on a symlink as the last component (the path is resolved, so none is expected).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True, slots=True)
class FileHead:
    text: str  # at most the requested number of characters
    size: int  # bytes of the whole file
    truncated: bool  # the file has more than ``text``


def read_head(path: Path, max_chars: int) -> FileHead:
    """The first ``max_chars`` characters of a text file, without reading the rest.

    ``path`` must come from :func:`resolve_inside`; undecodable bytes become U+FFFD.
    """
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    with open(fd, encoding="utf-8", errors="replace") as f:
        size = os.fstat(f.fileno()).st_size
        text = f.read(max_chars + 1)
    return FileHead(text[:max_chars], size, len(text) > max_chars)


def write_bytes_nofollow(path: Path, data: bytes) -> None:
    """Create or overwrite ``path`` (from :func:`resolve_inside`) without following a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644)
    with open(fd, "wb") as f:
        f.write(data)


INBOX_DIR = "inbox"
"""Where files users send are saved in their workspace, for the file tools to read later."""


class WorkspaceFull(AgentError):
    """Saving a file would pass the workspace quota; nothing was written."""


def save_inbox_file(root: Path, name: str, data: bytes, max_bytes: int) -> str:
    """Save ``data`` as ``inbox/<name>`` in the workspace ``root``; the workspace-relative path.

    The name is reduced to safe characters. The same name again overwrites the file (a
    replayed message saves the same file anew); raises :class:`WorkspaceFull` over the quota.
    """
    safe = _UNSAFE.sub("_", unicodedata.normalize("NFKC", name)).strip("._")[:100] or "file"
    relative = f"{INBOX_DIR}/{safe}"
    target = resolve_inside(root, relative)
    replaced = target.stat().st_size if target.is_file() else 0
    used = workspace_size(root)
    if used - replaced + len(data) > max_bytes:
        raise WorkspaceFull(f"{relative}: {len(data)} bytes would pass the quota ({max_bytes})")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not is_inside(root.resolve(), target.parent.resolve()):  # a link planted since the check
        raise WorkspaceEscape(f"path {relative!r} is outside the workspace")
    write_bytes_nofollow(target, data)
    return relative


def workspace_size(root: Path) -> int:
    """Bytes of the regular files under ``root`` (0 if it does not exist yet).

    Symlinks are not followed and count as nothing: a link to a big file elsewhere neither
    fills the quota nor is a way around it (its target is outside or already counted).
    """
    total = 0
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue  # removed while walking
        except OSError:
            continue  # missing or unreadable directory
    return total


AGENTS_DIR = "_agents"  # never a user directory: sanitized user ids can't start with "_"


def agent_workspace(base: Path, agent_id: str) -> Path:
    """Agent-level files of a predefined agent; sanitized like a user id."""
    return (base / AGENTS_DIR / sanitize_user_id(agent_id)).resolve()
