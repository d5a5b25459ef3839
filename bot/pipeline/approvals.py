"""``/approve`` and ``/deny``: an owner or admin answers an ``exec`` command waiting to run.

The agent core's ask hook (``agent_core/exec_approval.py``) calls :meth:`ExecApprovals.ask`
with the run's context: the command is posted to the chat the run came from, and the hook
waits. ``/approve`` or ``/deny`` in that chat (handled before any queue, like ``/stop``)
answers the oldest command still waiting there; only the agent's owners and the configured
admins (``bot.admins``, ``channels.<name>.admins``) may answer. Without an answer within
``tools.exec.approval_timeout`` the command is not run, and the chat is told. On a channel
with buttons (:class:`channels.ChoicePoster`: Slack) the request carries Approve and Deny
buttons, whose clicks arrive as those two commands from the user who clicked.

Waiting commands live in this process: in a cluster, the answer must reach the process that
runs the turn (it does for the chats whose messages that process holds).
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from agent_core import ExecProfile, Verdict
from agent_core.tools import ToolContext
from bot.pipeline.chunking import render_chunks
from bot.pipeline.delivery import send_with_retry
from channels import Channel, ChatRef, ChatType, ChoicePoster, InboundMessage

log = structlog.get_logger(__name__)

CHOICES = (("Approve", "/approve"), ("Deny", "/deny"))
MAX_SHOWN_CHARS = 3000  # a command longer than this can't be shown whole: not asked, refused
_ids = itertools.count(1)


@dataclass(slots=True)
class _Waiting:
    id: int
    command: str
    profile: ExecProfile
    run_id: str
    answer: asyncio.Future[Verdict] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


def _chat_key(chat: ChatRef) -> tuple[str, str, str]:
    return (chat.channel, chat.chat_id, chat.thread_id or "")


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


class ExecApprovals:
    """The bot's :class:`agent_core.Approver`: commands waiting in each chat."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self.channels = channels
        self._waiting: dict[tuple[str, str, str], deque[_Waiting]] = {}

    def waiting(self, chat: ChatRef) -> int:
        return len(self._waiting.get(_chat_key(chat), ()))

    async def ask(self, ctx: ToolContext, command: str, profile: ExecProfile) -> Verdict | None:
        origin = ctx.request.origin if ctx.request is not None else None
        if not isinstance(origin, InboundMessage) or origin.chat.channel not in self.channels:
            return None  # a cron run of a chat gone, a child without a chat: nobody to ask
        channel, chat = self.channels[origin.chat.channel], origin.chat
        if chat.chat_type is ChatType.DIRECT and not profile.is_trusted(
            f"{chat.channel}:{origin.sender.id}"
        ):
            # Nobody but the asker is in a direct chat: no answer could ever come.
            await send_with_retry(
                channel,
                chat,
                "The agent wanted to run a command, which needs an owner's or admin's approval; "
                "none of them is in this chat, so it was not run.",
            )
            return Verdict.NO_ONE
        if len(command) > MAX_SHOWN_CHARS:
            await send_with_retry(
                channel,
                chat,
                f"The agent wanted to run a command of {len(command)} characters, too long to "
                "show for approval: it was not run.",
            )
            return Verdict.DENIED
        waiting = _Waiting(next(_ids), command, profile, ctx.run_id)
        queue = self._waiting.setdefault(_chat_key(chat), deque())
        queue.append(waiting)
        try:
            await self._post_request(channel, chat, command, profile)
            log.info("exec.approval_asked", run_id=ctx.run_id, chat=chat.chat_id, id=waiting.id)
            try:
                verdict = await asyncio.wait_for(
                    asyncio.shield(waiting.answer), profile.approval_timeout
                )
            except TimeoutError:
                verdict = Verdict.TIMED_OUT
                await send_with_retry(
                    channel,
                    chat,
                    f"No answer within {_minutes(profile.approval_timeout)}: the command was "
                    "not run.",
                )
        finally:
            queue.remove(waiting)
            if not queue:
                self._waiting.pop(_chat_key(chat), None)
        log.info("exec.approval_answered", run_id=ctx.run_id, id=waiting.id, verdict=str(verdict))
        return verdict

    async def _post_request(
        self, channel: Channel, chat: ChatRef, command: str, profile: ExecProfile
    ) -> None:
        """The command in a code block, rendered for the platform like any answer: what the
        owner reads is exactly what would run (no markup of the command's own)."""
        fence = "`" * max(3, _longest_backtick_run(command) + 1)
        markdown = (
            f"The agent asks to run this command:\n\n{fence}\n{command}\n{fence}\n\n"
            f"An owner or admin may answer /approve or /deny (within "
            f"{_minutes(profile.approval_timeout)})."
        )
        caps = channel.capabilities
        *first, last = render_chunks(markdown, caps.formatting, caps.max_chars) or [markdown]
        for chunk in first:
            await send_with_retry(channel, chat, chunk)
        if isinstance(channel, ChoicePoster):  # Slack: buttons that send those commands
            await channel.send_choices(chat, last, CHOICES)
        else:
            await send_with_retry(channel, chat, last)

    def answer(self, msg: InboundMessage, *, approve: bool) -> str:
        """``/approve`` or ``/deny`` from ``msg``: the reply to post in the chat."""
        queue = self._waiting.get(_chat_key(msg.chat))
        if not queue:
            return "No command is waiting for approval here."
        waiting = next((w for w in queue if not w.answer.done()), None)
        if waiting is None:
            return "No command is waiting for approval here."
        user_id = f"{msg.chat.channel}:{msg.sender.id}"
        if not waiting.profile.is_trusted(user_id):
            log.info("exec.approval_refused", sender=user_id, id=waiting.id)
            return "Only an owner or admin of this agent may answer."
        waiting.answer.set_result(Verdict.APPROVED if approve else Verdict.DENIED)
        # The command is not repeated: this reply goes out as it is, without the rendering
        # that keeps the request's command from being read as markup.
        return "Approved: the command runs now." if approve else "Denied: the command will not run."
