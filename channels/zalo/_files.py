"""What the ``send_file`` tool (issue 29) can do on Zalo: a text note naming the file.

The Zalo Bot API sends no documents at all, and its ``sendPhoto`` takes ``photo`` as a URL that
Zalo's servers download themselves: there is no upload. Loopgate serves no public file URLs, so
a file from the agent's workspace can't reach a Zalo chat; the chat gets an honest note instead
(its name and size, and the caption), and the tool tells the agent that the file itself was not
delivered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from channels.zalo._client import MAX_TEXT_CHARS


def size_text(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1_000_000:.1f} MB"


async def file_note(path: Path, *, name: str, mime: str, caption: str) -> str:
    """The note sent in the file's place, at most one Zalo message long."""
    size = (await asyncio.to_thread(path.stat)).st_size
    why = (
        "a Zalo bot can send a picture only from a public link"
        if mime.startswith("image/")
        else "Zalo bots can't send files"
    )
    note = f"[file: {name}, {size_text(size)} — not sent: {why}]"
    caption = caption.strip()
    if caption:
        note = f"{caption}\n{note}"
        if len(note) > MAX_TEXT_CHARS:
            room = MAX_TEXT_CHARS - (len(note) - len(caption)) - 1
            note = f"{caption[:room]}…\n{note[len(caption) + 1 :]}"
    return note
