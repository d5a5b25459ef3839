"""Session keys: which conversation a message belongs to.

``agent:{agent}:{channel}:{direct|group}:{chat_id}[:topic:{thread_id}]`` — a DM session is
per user (the chat id of a DM is the user), a group session is shared by the room, and each
forum topic or thread is its own session.
"""

from __future__ import annotations

from channels import ChatRef


def session_key(agent_id: str, chat: ChatRef) -> str:
    key = f"agent:{agent_id}:{chat.channel}:{chat.chat_type.value}:{chat.chat_id}"
    if chat.thread_id:
        key += f":topic:{chat.thread_id}"
    return key


def channel_of(key: str) -> str:
    """The channel ``key`` names ("" for a key of another shape); agent ids hold no ``:``."""
    parts = key.split(":", 3)
    return parts[2] if len(parts) == 4 and parts[0] == "agent" else ""
