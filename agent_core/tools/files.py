"""read_file, write_file and list_files, confined to the run's workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext
from agent_core.workspace import WorkspaceEscape, resolve_inside

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500


def _path_arg(args: dict[str, Any], tool: str, *, default: str | None = None) -> str:
    value = args.get("path", default)
    if not isinstance(value, str) or (not value and default is None):
        raise ToolError(tool, "argument 'path' (string) is required")
    return value


def _inside(ctx: ToolContext, tool: str, path: str) -> Path:
    try:
        return resolve_inside(ctx.workspace, path)
    except WorkspaceEscape as exc:
        raise ToolError(tool, f"access denied: {exc}") from exc


async def _read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    target = _inside(ctx, "read_file", _path_arg(args, "read_file"))
    if not target.is_file():
        raise ToolError("read_file", f"no such file: {args['path']}")
    text = await asyncio.to_thread(target.read_text, encoding="utf-8", errors="replace")
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n[truncated: file has {len(text)} characters]"
    return text


async def _write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    path = _path_arg(args, "write_file")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("write_file", "argument 'content' (string) is required")
    target = _inside(ctx, "write_file", path)
    if target == ctx.workspace.resolve():
        raise ToolError("write_file", "path must name a file, not the workspace itself")

    def write() -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")

    await asyncio.to_thread(write)
    return f"wrote {len(content)} characters to {path}"


async def _list_files(args: dict[str, Any], ctx: ToolContext) -> str:
    path = _path_arg(args, "list_files", default=".")
    target = _inside(ctx, "list_files", path or ".")
    if not target.exists():
        return "(empty)" if target == ctx.workspace.resolve() else f"no such directory: {path}"
    if not target.is_dir():
        raise ToolError("list_files", f"not a directory: {path}")

    def listing() -> list[str]:
        root = ctx.workspace.resolve()
        entries = sorted(target.iterdir())[:MAX_LIST_ENTRIES]
        return [f"{p.relative_to(root).as_posix()}{'/' if p.is_dir() else ''}" for p in entries]

    entries = await asyncio.to_thread(listing)
    return "\n".join(entries) if entries else "(empty)"


_PATH_SCHEMA = {"type": "string", "description": "Path relative to the workspace."}

READ_FILE = Tool(
    name="read_file",
    description="Read a UTF-8 text file from your workspace.",
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
