"""Session keys: which conversation a message belongs to.

``agent:{agent}:{channel}:{direct|group}:{chat_id}[:topic:{thread_id}]`` — a DM session is
per user (the chat id of a DM is the user), a group session is shared by the room, and each
forum topic or thread is its own session.
"""

from __future__ import annotations

from channels import ChatRef, ChatType


def session_key(agent_id: str, chat: ChatRef) -> str:
    key = f"agent:{agent_id}:{chat.channel}:{chat.chat_type.value}:{chat.chat_id}"
    if chat.thread_id:
        key += f":topic:{chat.thread_id}"
    return key


def chat_of(key: str) -> ChatRef | None:
    """The chat ``key`` names: :func:`session_key` read back (``None`` for a key of another
    shape, a sub-agent's or a scheduled job's)."""
    parts = key.split(":", 4)
    if len(parts) != 5 or parts[0] != "agent":
        return None
    _, _, channel, kind, rest = parts
    try:
        chat_type = ChatType(kind)
    except ValueError:
        return None
    chat_id, marker, thread = rest.partition(":topic:")
    return ChatRef(channel, chat_id, chat_type, thread if marker else None)
