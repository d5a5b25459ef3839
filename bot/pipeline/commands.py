"""Chat commands handled before the queue: /stop, /stopall, /help, /reset, /usage, /approve,
/deny."""

from __future__ import annotations

import enum
import re


class Command(enum.StrEnum):
    STOP = "stop"
    STOPALL = "stopall"
    RESET = "reset"
    HELP = "help"
    APPROVE = "approve"  # an exec command waiting for an owner (bot/pipeline/approvals.py)
    DENY = "deny"
    USAGE = "usage"


_COMMAND = re.compile(r"^/([A-Za-z]+)(?:@(\S+))?\s*$")

HELP_TEXT = (
    "Send me a message and I'll answer.\n"
    "/stop — stop the answer in progress\n"
    "/stopall — stop everything in this chat and drop queued messages\n"
    "/reset — start a new conversation\n"
    "/approve — let a command the agent asks to run go ahead (owners and admins)\n"
    "/deny — refuse it\n"
    "/usage — your usage today and this month\n"
    "/help — this help"
)


def parse_command(text: str, bot_username: str | None = None) -> Command | None:
    """The command in a message that is only a command (``/stop`` or ``/stop@mybot``).

    A command addressed to another bot (``/stop@otherbot``) is not ours.
    """
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name, target = match.group(1).lower(), match.group(2)
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    try:
        return Command(name)
    except ValueError:
        return None
