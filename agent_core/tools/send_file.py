"""``send_file``: the model sends a file from its workspace to the chat it talks in (issue 29).

``{"path": P, "caption": C}``. The path is confined exactly as the file tools confine theirs
(:func:`agent_core.tools.files.resolve_tool_path`): relative to the workspace, or absolute
inside one of the run's extra roots. The tool knows no chat and no platform: it hands the
resolved file to a :class:`FileSender`, which the bot binds to the calling run's chat and
channel. Whatever goes wrong is a tool error the model can act on: no such file, a folder, a
path outside the workspace, a caption too long, a file the platform refuses (its size limit).
"""

from __future__ import annotations

import asyncio
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.files import resolve_tool_path

SEND_FILE = "send_file"
MAX_CAPTION_CHARS = 4000


@dataclass(frozen=True, slots=True)
class OutgoingFile:
    """A workspace file on its way to the chat: resolved, checked, named."""

    path: Path  # resolved, inside the workspace (or an extra root)
    shown_path: str  # as the model wrote it, for messages
    name: str
    mime: str
    size: int
    caption: str


class FileSender(Protocol):
    """The bot's side: puts the file in the chat of the run that calls the tool."""

    async def send_file(self, ctx: ToolContext, file: OutgoingFile) -> str:
        """Send ``file``; returns what the model is told (what was sent, and how). Raises
        :class:`~agent_core.errors.ToolError` when this run's chat can't get it."""
        ...


_DESCRIPTION = (
    "Send a file from your workspace to the user in this chat, e.g. a report you wrote or an "
    "image you made. Pictures (JPEG, PNG, WebP) show as photos where the chat can; anything "
    "else goes as a document. 'caption' (optional, plain text) is shown with the file. The "
    "result says how it was sent, or why it could not be."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file, relative to the workspace (e.g. reports/summary.pdf).",
        },
        "caption": {"type": "string", "description": "Text shown with the file (optional)."},
    },
    "required": ["path"],
}


def guess_mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


async def outgoing_file(args: dict[str, Any], ctx: ToolContext, *, name: str) -> OutgoingFile:
    """The file ``args`` names, confined and checked; a :class:`ToolError` otherwise."""
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ToolError(name, "argument 'path' (string) is required: the file to send")
    caption = args.get("caption", "")
    if caption is None:
        caption = ""
    if not isinstance(caption, str):
        raise ToolError(name, "argument 'caption' must be a string")
    if len(caption) > MAX_CAPTION_CHARS:
        raise ToolError(
            name,
            f"the caption is {len(caption)} characters, over {MAX_CAPTION_CHARS}: send a "
            "shorter caption, and the rest as your answer",
        )
    root, target = resolve_tool_path(ctx, name, path, reading=True)
    if target == root or target.is_dir():
        raise ToolError(name, f"{path} is a folder: name one file (see list_files)")
    try:
        size = (await asyncio.to_thread(target.stat)).st_size
    except FileNotFoundError:
        raise ToolError(name, f"no such file: {path} (see list_files)") from None
    except OSError as exc:
        raise ToolError(name, f"can't read {path}: {exc.strerror}") from exc
    if not target.is_file():
        raise ToolError(name, f"{path} is not a regular file")
    if size == 0:
        raise ToolError(name, f"{path} is empty: nothing was sent")
    return OutgoingFile(target, path, target.name, guess_mime(target.name), size, caption)


def send_file_tool(sender: FileSender, *, name: str = SEND_FILE) -> Tool:
    """The ``send_file`` tool of one agent, sending through ``sender``."""

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        file = await outgoing_file(args, ctx, name=name)
        return await sender.send_file(ctx, file)

    return Tool(name=name, description=_DESCRIPTION, parameters=_PARAMETERS, handler=handler)
