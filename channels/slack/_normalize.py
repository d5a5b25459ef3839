"""Pure helpers that turn Slack event payloads into the pieces of an InboundMessage."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from channels.types import Attachment, ChatType, attachment_kind

# ``message`` subtypes that are a person saying something; every other subtype (joins, topic
# changes, bot_message...) is not addressed to the agent.
USER_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message"})
EDIT_SUBTYPES = frozenset({"message_changed", "message_deleted"})

# The bot's status emoji (bot/pipeline/reactions.py) by their Slack names.
SLACK_EMOJI: dict[str, str] = {
    "👀": "eyes",
    "🤔": "thinking_face",
    "👨‍💻": "male-technologist",
    "👍": "+1",
    "😢": "cry",
    "✅": "white_check_mark",
    "❌": "x",
}
TERMINAL_EMOJI = frozenset({"👍", "😢", "✅", "❌"})


def slack_emoji_name(emoji: str) -> str:
    """``👀`` → ``eyes``; a name (``eyes`` or ``:eyes:``) is passed through."""
    return SLACK_EMOJI.get(emoji, emoji.strip(":"))


def chat_type_of(event: dict[str, Any], channel_id: str) -> ChatType:
    kind = event.get("channel_type")
    if kind == "im" or (kind is None and channel_id.startswith("D")):
        return ChatType.DIRECT
    return ChatType.GROUP  # channel, group (private channel), mpim (group DM)


def mentions(text: str, user_id: str) -> bool:
    return bool(user_id) and f"<@{user_id}" in text


def strip_mention(text: str, user_id: str) -> str:
    """Remove the bot's own ``<@U…>`` tokens so ``@bot /stop`` reads as ``/stop``."""
    if not user_id:
        return text.strip()
    cleaned = re.sub(rf"<@{re.escape(user_id)}(?:\|[^>]*)?>:?", " ", text)
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip()


def file_attachments(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The files shared in a message that the bot can download (``url_private_download``,
    fetched later with the bot token); the rest get :func:`file_notes`."""
    found = []
    for f in _files(event):
        url = _download_url(f)
        if url is None:
            continue
        mime = str(f.get("mimetype") or "application/octet-stream")
        duration_ms = f.get("duration_ms")
        found.append(
            Attachment(
                kind=attachment_kind(mime),
                file_id=url,
                name=str(f.get("name") or f.get("title") or f.get("id") or "file"),
                mime=mime,
                size=int(f.get("size") or 0),
                duration=round(duration_ms / 1000) if isinstance(duration_ms, int) else None,
                # A clip recorded in Slack, as opposed to an audio file uploaded.
                voice=f.get("subtype") == "slack_audio",
            )
        )
    return tuple(found)


def file_notes(event: dict[str, Any]) -> list[str]:
    """A clear note per file that can't be downloaded (an external link, a deleted file)."""
    notes = []
    for f in _files(event):
        if _download_url(f) is not None:
            continue
        name = f.get("name") or f.get("title") or "a file"
        kind = f.get("mimetype") or f.get("filetype") or "unknown type"
        notes.append(f"[The user attached a file that can't be read here: {name} ({kind})]")
    return notes


def slack_file_host(url: str, api_base_url: str) -> bool:
    """Whether ``url`` is served by Slack (``files.slack.com``...) or by the host of the
    configured API base (a proxy, a test server): the only places the bot token may go."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
        return True
    base = urlsplit(api_base_url)
    return bool(host) and (parts.scheme, parts.netloc) == (base.scheme, base.netloc)


def _files(event: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in event.get("files") or [] if isinstance(f, dict)]


def _download_url(f: dict[str, Any]) -> str | None:
    # Hosted files only: an external one (Google Drive...) is a link Slack does not serve, a
    # tombstone a deleted file.
    if f.get("mode") in ("external", "tombstone") or f.get("is_external"):
        return None
    url = f.get("url_private_download") or f.get("url_private")
    return str(url) if url else None


def message_text(event: dict[str, Any], bot_user_id: str) -> str:
    parts = [strip_mention(str(event.get("text") or ""), bot_user_id), *file_notes(event)]
    return "\n".join(part for part in parts if part)


def is_from_bot(event: dict[str, Any], bot_user_id: str, bot_id: str) -> bool:
    """Our own posts and every other bot's: bots answering bots loop forever."""
    return bool(
        event.get("bot_id")
        or event.get("subtype") == "bot_message"
        or event.get("bot_profile")
        or (bot_user_id and event.get("user") == bot_user_id)
        or (bot_id and event.get("bot_id") == bot_id)
    )
