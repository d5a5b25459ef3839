"""Buttons (:class:`~channels.protocol.ChoicePoster`): the blocks we post, and a click
(a ``block_actions`` interaction) read back as the message its button stands for."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from channels.slack._inbound import COMMANDS
from channels.types import ChatRef, ChatType, InboundMessage, Sender

ACTION_PREFIX = "loopgate_command_"
ACTION_ID = re.compile(rf"^{ACTION_PREFIX}\d+$")
BLOCK_TEXT_MAX = 3000  # Slack's limit on a section block's text


def choice_blocks(text: str, choices: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    buttons = [
        {
            "type": "button",
            "action_id": f"{ACTION_PREFIX}{i}",
            "text": {"type": "plain_text", "text": label[:75]},
            "value": command,
        }
        for i, (label, command) in enumerate(choices)
    ]
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": buttons},
    ]


def click_message(name: str, body: dict[str, Any]) -> InboundMessage | None:
    """A ``block_actions`` payload as the command its button carries, from the user who
    clicked, in the chat (and thread) of the message with the button; None if it is not one
    of ours or names no command we take."""
    actions = body.get("actions") or []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    command = str(action.get("value") or "")
    if not ACTION_ID.match(str(action.get("action_id") or "")) or command not in COMMANDS:
        return None
    channel = body.get("channel") or {}
    user = body.get("user") or {}
    message = body.get("message") or {}
    channel_id, user_id = str(channel.get("id") or ""), str(user.get("id") or "")
    if not channel_id or not user_id:
        return None
    chat_type = ChatType.DIRECT if channel_id.startswith("D") else ChatType.GROUP
    thread_ts = str(message.get("thread_ts") or "") or None
    click = str(action.get("action_ts") or body.get("trigger_id") or "")
    return InboundMessage(
        chat=ChatRef(name, channel_id, chat_type, thread_ts),
        message_id=f"action:{click}",
        sender=Sender(id=user_id, name=str(user.get("username") or user.get("name") or user_id)),
        text=command,
        metadata={"slack_action": command},
    )
