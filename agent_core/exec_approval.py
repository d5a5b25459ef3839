"""Approvals of ``exec`` commands, as ``PreToolUse`` hooks (they run before any raw I/O).

Two hooks, in this order, for calls of the ``exec`` tool only, in the run's approval mode
(:meth:`ExecProfile.approval_for`):

- **deny list** (modes ``ask`` and ``deny_patterns``): a command line matching one of the
  regular expressions is refused before anything else happens;
- **ask** (mode ``ask``): the command is shown in the chat and the run waits until an owner or
  admin answers ``/approve`` or ``/deny``, for ``approval_timeout`` seconds at most. Refused,
  unanswered, or with no chat to ask in, the command does not run.

The agent core knows no chat: :class:`Approver` is the port the bot implements
(``bot/pipeline/approvals.py``).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from typing import Protocol

from agent_core.exec_profile import Approval, ExecProfile
from agent_core.hooks import Block, PreToolUseHook
from agent_core.messages import ToolCall
from agent_core.tools.base import ToolContext
from agent_core.tools.exec import EXEC


class Verdict(enum.StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    NO_ONE = "no_one"  # nobody in the chat may approve (another user's direct chat)


class Approver(Protocol):
    async def ask(self, ctx: ToolContext, command: str, profile: ExecProfile) -> Verdict | None:
        """Show ``command`` in the calling run's chat and wait for an owner's answer (at most
        ``profile.approval_timeout`` seconds). None: this run has no chat to ask in."""
        ...


def _command(call: ToolCall) -> str | None:
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return None  # the tool refuses it itself, with the reason
    command = args.get("command") if isinstance(args, dict) else None
    return command if isinstance(command, str) else None


def exec_hooks(
    profile: ExecProfile,
    deny_patterns: Sequence[str],
    approver: Approver | None,
    *,
    tool_name: str = EXEC,
) -> list[PreToolUseHook]:
    """The deny-list hook and the ask hook of one agent's ``exec``."""
    patterns = [re.compile(p) for p in deny_patterns]

    async def exec_deny_list(call: ToolCall, ctx: ToolContext) -> Block | None:
        if call.name != tool_name or profile.approval_for(ctx.request) is Approval.OFF:
            return None
        command = _command(call)
        if command is None:
            return None
        for pattern in patterns:
            if pattern.search(command):
                return Block(
                    f"the command matches the deny list ({pattern.pattern!r}); it was not run"
                )
        return None

    async def exec_ask(call: ToolCall, ctx: ToolContext) -> Block | None:
        if call.name != tool_name or profile.approval_for(ctx.request) is not Approval.ASK:
            return None
        command = _command(call)
        if command is None:
            return None
        if approver is None:
            return Block("commands need an owner's approval here, and no one can be asked")
        verdict = await approver.ask(ctx, command, profile)
        if verdict is Verdict.APPROVED:
            return None
        if verdict is Verdict.DENIED:
            return Block("an owner or admin refused to run it (/deny)")
        if verdict is Verdict.NO_ONE:
            return Block(
                "commands need an owner's or admin's /approve, and none of them is in this chat; "
                "it was not run"
            )
        if verdict is Verdict.TIMED_OUT:
            return Block(
                f"no owner or admin answered within {profile.approval_timeout:g} s; it was not run"
            )
        return Block("commands need an owner's approval, and this run has no chat to ask in")

    return [exec_deny_list, exec_ask]
