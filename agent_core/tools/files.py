"""read_file, write_file and list_files, confined to the run's workspace.

Relative paths mean the run's workspace; absolute paths may also point into the run's extra
roots (team workspace handling, agent-loop spec section 11). Quotas apply per root. read_file and
list_files may also reach the folders of the run's shared skills (``ToolContext.read_roots``) by
absolute path: reading a skill stays confined to its own folder, and nothing there is written."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext
from agent_core.workspace import (
    WorkspaceEscape,
    is_inside,
    read_head,
    resolve_in_roots,
    resolve_inside,
    workspace_size,
    write_bytes_nofollow,
)

MAX_READ_CHARS = 100_000  # read_file reads no more of a file than this, however big it is
MAX_LIST_ENTRIES = 500
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # valid in a JSON string, never in UTF-8


def _path_arg(args: dict[str, Any], tool: str, *, default: str | None = None) -> str:
    value = args.get("path", default)
    if not isinstance(value, str) or (not value and default is None):
        raise ToolError(tool, "argument 'path' (string) is required")
    return value


def resolve_tool_path(
    ctx: ToolContext, tool: str, path: str, *, reading: bool = False
) -> tuple[Path, Path]:
    """``(root, target)``: a relative ``path`` means the workspace; an absolute one may also
    point into one of ``ctx.extra_roots`` (a team workspace, the agent's own workspace) and,
    when ``reading``, into one of ``ctx.read_roots`` (a shared skill's folder)."""
    try:
        if not os.path.isabs(path):
            root = ctx.workspace.resolve()
            return root, resolve_inside(root, path)  # relative: the workspace only
        try:
            return resolve_in_roots(ctx.workspace, ctx.extra_roots, path)
        except WorkspaceEscape:
            found = _in_read_root(ctx, path)
            if found is None:
                raise
            if not reading:
                raise ToolError(
                    tool, f"access denied: {path} is in a shared skill (read-only)"
                ) from None
            return found
    except WorkspaceEscape as exc:
        raise ToolError(tool, f"access denied: {exc}") from exc


def _in_read_root(ctx: ToolContext, path: str) -> tuple[Path, Path] | None:
    """``(folder, target)`` when ``path`` resolves (links followed, ``..`` applied) inside one
    of the read-only roots; the shared skills' root itself is not one, only each skill."""
    if not ctx.read_roots:
        return None
    candidate = Path(path).resolve()
    for folder in ctx.read_roots:
        allowed = folder.resolve()
        if is_inside(allowed, candidate):
            return allowed, candidate
    return None


async def _read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    _, target = resolve_tool_path(ctx, "read_file", _path_arg(args, "read_file"), reading=True)
    if not target.is_file():
        raise ToolError("read_file", f"no such file: {args['path']}")
    try:
        head = await asyncio.to_thread(read_head, target, MAX_READ_CHARS)
    except OSError as exc:  # e.g. a link swapped in since the check (O_NOFOLLOW)
        raise ToolError("read_file", f"access denied: {args['path']}: {exc.strerror}") from exc
    if head.truncated:
        return head.text + (
            f"\n[truncated: showing the first {MAX_READ_CHARS} characters; "
            f"the file has {head.size} bytes]"
        )
    return head.text


async def _write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    path = _path_arg(args, "write_file")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("write_file", "argument 'content' (string) is required")
    # Lone surrogates (possible in JSON) can't be UTF-8: they become U+FFFD, not a crash.
    data = _LONE_SURROGATE.sub("\ufffd", content).encode("utf-8")
    if len(data) > ctx.max_file_bytes:
        raise ToolError(
            "write_file",
            f"content is {len(data)} bytes, over the limit of {ctx.max_file_bytes} bytes per "
            "file; nothing was written. Write less, or split it over several smaller files.",
        )
    root, target = resolve_tool_path(ctx, "write_file", path)  # the quota is that of ``root``
    if target == root:
        raise ToolError("write_file", "path must name a file, not the workspace itself")
    if target.is_dir():
        raise ToolError("write_file", f"{path} is a directory, not a file")

    def write() -> None:
        # The file being overwritten frees its bytes (``target`` is resolved: no link).
        try:
            replaced = target.stat().st_size
        except FileNotFoundError:
            replaced = 0
        used = workspace_size(root)
        after = used - replaced + len(data)
        if after > ctx.workspace_max_bytes:
            raise ToolError(
                "write_file",
                f"workspace quota exceeded: {used} of {ctx.workspace_max_bytes} bytes are used "
                f"and this write ({len(data)} bytes) would make it {after}; nothing was "
                "written. Free space by overwriting files you no longer need with less content.",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        if not is_inside(root, target.parent.resolve()):  # a link planted since the check
            raise ToolError("write_file", f"access denied: path {path!r} is outside the workspace")
        try:
            write_bytes_nofollow(target, data)
        except OSError as exc:  # ELOOP: the target became a symlink since the check
            raise ToolError("write_file", f"could not write {path}: {exc.strerror}") from exc

    await asyncio.to_thread(write)
    return f"wrote {len(content)} characters to {path}"


async def _list_files(args: dict[str, Any], ctx: ToolContext) -> str:
    path = _path_arg(args, "list_files", default=".")
    root, target = resolve_tool_path(ctx, "list_files", path or ".", reading=True)
    if not target.exists():
        return "(empty)" if target == root else f"no such directory: {path}"
    if not target.is_dir():
        raise ToolError("list_files", f"not a directory: {path}")
    absolute = os.path.isabs(path)  # entries are named the way the folder was

    def listing() -> list[str]:
        entries = sorted(target.iterdir())[:MAX_LIST_ENTRIES]
        return [
            f"{(p if absolute else p.relative_to(root)).as_posix()}{'/' if p.is_dir() else ''}"
            for p in entries
        ]

    entries = await asyncio.to_thread(listing)
    return "\n".join(entries) if entries else "(empty)"


_PATH_SCHEMA = {
    "type": "string",
    "description": (
        "Path relative to the workspace, or an absolute path inside a folder the system "
        "prompt names (e.g. the team workspace)."
    ),
}

READ_FILE = Tool(
    name="read_file",
    description="Read a UTF-8 text file from your workspace, or a skill's file.",
    parameters={"type": "object", "properties": {"path": _PATH_SCHEMA}, "required": ["path"]},
    handler=_read_file,
    read_only=True,
)
WRITE_FILE = Tool(
    name="write_file",
    description="Create or overwrite a text file in your workspace (parent folders are created).",
    parameters={
        "type": "object",
        "properties": {"path": _PATH_SCHEMA, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    handler=_write_file,
)
LIST_FILES = Tool(
    name="list_files",
    description="List files and folders in a workspace directory (default: the workspace root).",
    parameters={"type": "object", "properties": {"path": _PATH_SCHEMA}},
    handler=_list_files,
    read_only=True,
)

FILE_TOOLS = (READ_FILE, WRITE_FILE, LIST_FILES)
