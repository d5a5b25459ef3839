"""``/approve`` and ``/deny``: an owner or admin answers an ``exec`` command waiting to run.

The agent core's ask hook (``agent_core/exec_approval.py``) calls :meth:`ExecApprovals.ask`
with the run's context: the command is posted to the chat the run came from, and the hook
waits. ``/approve`` or ``/deny`` in that chat (handled before any queue, like ``/stop``)
answers the oldest command still waiting there; only the agent's owners and the configured
admins (``bot.admins``, ``channels.<name>.admins``) may answer. Without an answer within
``tools.exec.approval_timeout`` the command is not run, and the chat is told. On a channel
with buttons (:class:`channels.ChoicePoster`: Slack) the request carries Approve and Deny
buttons, whose clicks arrive as those two commands from the user who clicked.

Waiting commands live in the process running the turn. With several processes
(``redis.url``), an answer that finds nothing waiting here goes through the
:class:`ApprovalRelay` (``bot/cluster/approvals.py``) to the process where the command waits;
that process checks the answerer against the waiting command's agent, exactly as here, and
says what came of it, which is what the answerer's reply tells the chat. Without a relay no
Redis is involved.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

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


ChatKey = tuple[str, str, str]
"""Where commands wait: channel, chat id and thread (``""`` outside threads)."""


class Answer(enum.StrEnum):
    """What came of one ``/approve`` or ``/deny``."""

    APPROVED = "approved"
    DENIED = "denied"
    REFUSED = "refused"  # not an owner or admin of the waiting command's agent: it keeps waiting
    NOTHING = "nothing"  # no command waits in this chat (in any process)
    GONE = "gone"  # the command named was answered or gave up meanwhile (between processes)
    UNCONFIRMED = "unconfirmed"  # the process holding it did not confirm in time
    UNREACHABLE = "unreachable"  # nothing here, and the other processes can't be asked now


REPLIES = {
    Answer.APPROVED: "Approved: the command runs now.",
    Answer.DENIED: "Denied: the command will not run.",
    Answer.REFUSED: "Only an owner or admin of this agent may answer.",
    Answer.NOTHING: "No command is waiting for approval here.",
    Answer.GONE: "No command is waiting for approval here.",
    Answer.UNCONFIRMED: (
        "The command waiting here is held by another process of this bot, which did not "
        "confirm your answer in time: answer again if it is still waiting."
    ),
    Answer.UNREACHABLE: (
        "No command is waiting here in this process, and the bot's other processes can't be "
        "asked right now: try again in a moment."
    ),
}
"""The reply to the answerer. The command is not repeated: the reply goes out as it is,
without the rendering that keeps the request's command from being read as markup."""


class ApprovalRelay(Protocol):
    """Several processes: where commands wait, and answers for the others
    (:class:`bot.cluster.approvals.ClusterApprovals`)."""

    async def asked(self, chat: ChatKey, waiting_id: int, waits_for: float) -> None:
        """A command waits here for at most ``waits_for`` seconds: other processes may find it."""
        ...

    async def settled(self, chat: ChatKey, waiting_id: int) -> None:
        """It waits no more (answered, timed out, its run cancelled)."""
        ...

    async def forward(self, chat: ChatKey, user_id: str, *, approve: bool) -> Answer:
        """Nothing waits here: answer the oldest command waiting in another process."""
        ...


def _chat_key(chat: ChatRef) -> ChatKey:
    return (chat.channel, chat.chat_id, chat.thread_id or "")


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


class ExecApprovals:
    """The bot's :class:`agent_core.Approver`: commands waiting in each chat."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self.channels = channels
        self._waiting: dict[ChatKey, deque[_Waiting]] = {}
        self.relay: ApprovalRelay | None = None
        """Set when several processes share the chats (``redis.url``); None: this process only."""

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
        key = _chat_key(chat)
        queue = self._waiting.setdefault(key, deque())
        queue.append(waiting)
        relay = self.relay
        try:
            if relay is not None:  # before the request is posted, so any answer can find it
                await relay.asked(key, waiting.id, profile.approval_timeout)
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
                self._waiting.pop(key, None)
            if relay is not None:
                await relay.settled(key, waiting.id)
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

    async def answer(self, msg: InboundMessage, *, approve: bool) -> str:
        """``/approve`` or ``/deny`` from ``msg``: the reply to post in the chat."""
        key = _chat_key(msg.chat)
        user_id = f"{msg.chat.channel}:{msg.sender.id}"
        outcome = self.resolve(key, user_id, approve=approve)
        if outcome is Answer.NOTHING and self.relay is not None:
            outcome = await self.relay.forward(key, user_id, approve=approve)
        return REPLIES[outcome]

    def resolve(
        self, chat: ChatKey, user_id: str, *, approve: bool, waiting_id: int | None = None
    ) -> Answer:
        """Answer the oldest command still waiting in ``chat`` in this process (or the one
        numbered ``waiting_id``, which another process found), if ``user_id`` is an owner or
        admin of its agent. The one permission check, whichever process the answer came to."""
        queue = self._waiting.get(chat, ())
        waiting = next(
            (w for w in queue if not w.answer.done() and waiting_id in (None, w.id)), None
        )
        if waiting is None:
            return Answer.NOTHING if waiting_id is None else Answer.GONE
        if not waiting.profile.is_trusted(user_id):
            log.info("exec.approval_refused", sender=user_id, id=waiting.id)
            return Answer.REFUSED
        waiting.answer.set_result(Verdict.APPROVED if approve else Verdict.DENIED)
        return Answer.APPROVED if approve else Answer.DENIED
