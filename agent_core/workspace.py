"""Per-user workspaces and the one rule every file tool obeys: never leave the workspace."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


class WorkspaceEscape(ValueError):
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


def user_workspace(base: Path, user_id: str) -> Path:
    return (base / sanitize_user_id(user_id)).resolve()


def resolve_inside(workspace: Path, relative: str) -> Path:
    """Resolve ``relative`` inside ``workspace`` or raise :class:`WorkspaceEscape`.

    Symlinks are resolved before the check, so a link pointing outside is refused too.
    """
    if "\x00" in relative:
        raise WorkspaceEscape("path contains a NUL byte")
    root = workspace.resolve()
    candidate = (root / relative).resolve()
    if candidate != root and root not in candidate.parents:
        raise WorkspaceEscape(f"path {relative!r} is outside the workspace")
    return candidate


AGENTS_DIR = "_agents"  # never a user directory: sanitized user ids can't start with "_"


def agent_workspace(base: Path, agent_id: str) -> Path:
    """Agent-level files of a predefined agent; sanitized like a user id."""
    return (base / AGENTS_DIR / sanitize_user_id(agent_id)).resolve()
