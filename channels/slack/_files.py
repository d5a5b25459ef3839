"""A file from the agent's workspace into a Slack conversation: ``files_upload_v2`` (issue 29).

slack_sdk's ``files_upload_v2`` is three calls: ``files.getUploadURLExternal`` (a one-time
upload URL for the file's name and length), a POST of the bytes to that URL, and
``files.completeUploadExternal``, which shares the file in the channel, in the thread
(``thread_ts``) with the caption as ``initial_comment``. Slack takes files up to 1 GB; a larger
or an empty file is refused before anything is uploaded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from slack_sdk.web.async_client import AsyncWebClient

from channels.files import upload_size
from channels.protocol import SentFile
from channels.slack._errors import translate_slack_errors
from channels.types import ChatRef, MessageRef

MAX_FILE_BYTES = 1_000_000_000


def gigabytes(size: int) -> str:
    return f"{size / 1_000_000_000:.1f} GB"


def share_ts(file: dict[str, Any], channel: str) -> str:
    """The ts of the message that shows ``file`` in ``channel``, when Slack says it already
    (sharing may finish after ``completeUploadExternal`` answers)."""
    shares = file.get("shares") or {}
    for scope in ("public", "private"):
        found = (shares.get(scope) or {}).get(channel) or []
        if found and found[0].get("ts"):
            return str(found[0]["ts"])
    return ""


async def upload_file(
    client: AsyncWebClient,
    chat: ChatRef,
    path: Path,
    *,
    name: str,
    mime: str,
    caption: str,
    thread_ts: str | None,
) -> SentFile:
    await upload_size(path, name, platform="Slack", limit=MAX_FILE_BYTES, size_text=gigabytes)
    data = await asyncio.to_thread(path.read_bytes)
    with translate_slack_errors("files_upload_v2"):
        response = await client.files_upload_v2(
            channel=chat.chat_id,
            file=data,
            filename=name,
            title=name,
            initial_comment=caption.strip() or None,
            thread_ts=thread_ts,
        )
    file = response.get("file") or {}
    # Without the share's ts yet, the file id names what was sent.
    message_id = share_ts(file, chat.chat_id) or str(file.get("id") or "")
    how: Literal["photo", "document"] = "photo" if mime.startswith("image/") else "document"
    return SentFile(MessageRef(chat, message_id), how)
