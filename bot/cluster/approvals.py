"""``/approve`` and ``/deny`` across processes: the answer reaches the process where the
command waits.

A command of ``exec`` waits for its answer in the process running the turn
(:class:`bot.pipeline.approvals.ExecApprovals`), but the ``/approve`` (or the Slack button's
action) may reach any process. So each waiting command is also recorded in Redis, in a sorted
set per chat (``<prefix>:approvals:<sha256(chat)>``, member ``<process>|<id>``, score the
moment it gives up waiting), and removed once answered. A process whose own
``ExecApprovals`` has nothing waiting in the chat reads that set, oldest first, and sends the
answer (who answered, approve or deny) to the process holding the command, on that process's
channel ``<prefix>:approvals:to:<process>``. The holder applies the same check as for a local
answer (an owner or admin of the waiting command's agent) and sends back what came of it, which
the answering process tells the chat: approved, denied, refused, or nothing waiting.

- A holder that died left its members behind: its channel has no subscriber (``PUBLISH``
  returns 0), so its member is removed and the next one is tried. Its run died with it; the
  process that takes the turn over asks again.
- A holder that is subscribed but does not confirm within :data:`CONFIRM_WITHIN` (stalled,
  cut off): the answerer says so, and the command keeps waiting for another answer.
- Redis down while a command starts waiting: it can still be answered in its own process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from contextlib import suppress
from typing import Any

import structlog

from bot.cluster.connection import RedisLink
from bot.pipeline.approvals import Answer, ChatKey, ExecApprovals

log = structlog.get_logger(__name__)

CONFIRM_WITHIN = 3.0
"""Seconds an answering process waits for the holder's confirmation (one publish each way:
milliseconds when all is well)."""
KEEP_AFTER = 60.0
"""Seconds a chat's set outlives its last waiting command's deadline (a missed removal)."""

# Add a member; the set lives until its latest deadline (plus a margin), never shorter.
_ADD = """
redis.call('zadd', KEYS[1], ARGV[1], ARGV[2])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[1], ARGV[3])
end
return 1
"""


class ClusterApprovals:
    """Satisfies :class:`bot.pipeline.approvals.ApprovalRelay`; ``attach`` gives it this
    process's :class:`~bot.pipeline.approvals.ExecApprovals`, answered for the others."""

    def __init__(self, link: RedisLink, *, confirm_within: float = CONFIRM_WITHIN) -> None:
        self.link = link
        self.confirm_within = confirm_within
        self.channel = self._inbox(link.process_id)
        self._approvals: ExecApprovals | None = None
        self._pending: dict[str, asyncio.Future[Answer]] = {}  # our answers sent, by request id
        self._listener: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._subscribed = asyncio.Event()

    def _inbox(self, process: str) -> str:
        return self.link.key("approvals", "to", process)

    def _set_key(self, chat: ChatKey) -> str:
        digest = hashlib.sha256("\0".join(chat).encode()).hexdigest()[:32]
        return self.link.key("approvals", digest)

    def _member(self, waiting_id: int) -> str:
        return f"{self.link.process_id}|{waiting_id}"

    async def attach(self, approvals: ExecApprovals) -> None:
        """Answer the other processes' answers from now on, and relay ours to them."""
        self._approvals = approvals
        self._listener = asyncio.create_task(self._listen(), name="cluster:approvals")
        # An answer sent to this process before it listens would be lost.
        await asyncio.wait_for(self._subscribed.wait(), timeout=10)
        approvals.relay = self

    # -- ApprovalRelay ------------------------------------------------------------------------

    async def asked(self, chat: ChatKey, waiting_id: int, waits_for: float) -> None:
        until = time.time() + waits_for
        keep_ms = int((waits_for + KEEP_AFTER) * 1000)
        try:
            await self.link.run_script(
                _ADD, [self._set_key(chat)], until, self._member(waiting_id), keep_ms
            )
        except Exception as exc:
            # It can still be answered here; other processes will not find it.
            self.link.mark(False, exc)
            log.warning("exec.approval_unshared", id=waiting_id, error=repr(exc))

    async def settled(self, chat: ChatKey, waiting_id: int) -> None:
        try:
            await self.link.client.zrem(self._set_key(chat), self._member(waiting_id))
        except Exception as exc:  # the member expires with the set; a stale one is skipped
            self.link.mark(False, exc)
            log.info("exec.approval_unshare_failed", id=waiting_id, error=repr(exc))

    async def forward(self, chat: ChatKey, user_id: str, *, approve: bool) -> Answer:
        key = self._set_key(chat)
        try:
            client = self.link.client
            await client.zremrangebyscore(key, "-inf", time.time())  # gave up waiting
            members = [
                m.decode() if isinstance(m, bytes) else str(m)
                for m in await client.zrange(key, 0, -1)
            ]
        except Exception as exc:
            self.link.mark(False, exc)
            log.warning("exec.approval_relay_failed", error=repr(exc))
            return Answer.UNREACHABLE
        for member in members:  # oldest first, as in one process
            process, _, raw_id = member.partition("|")
            if process == self.link.process_id or not raw_id.isdigit():
                continue  # ours were looked at already (answered a moment ago)
            outcome = await self._send(key, member, process, chat, int(raw_id), user_id, approve)
            if outcome is not Answer.GONE:
                return outcome
        return Answer.NOTHING

    async def _send(
        self,
        key: str,
        member: str,
        process: str,
        chat: ChatKey,
        waiting_id: int,
        user_id: str,
        approve: bool,
    ) -> Answer:
        request_id = uuid.uuid4().hex
        reply: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        message = {
            "op": "answer",
            "request": request_id,
            "from": self.link.process_id,
            "chat": list(chat),
            "id": waiting_id,
            "user": user_id,
            "approve": approve,
        }
        try:
            try:
                receivers = await self.link.client.publish(
                    self._inbox(process), json.dumps(message)
                )
            except Exception as exc:
                self.link.mark(False, exc)
                log.warning("exec.approval_relay_failed", error=repr(exc))
                return Answer.UNREACHABLE
            if not receivers:  # nobody listens there: the process is gone, and its run
                log.info("exec.approval_holder_gone", holder=process, id=waiting_id)
                with suppress(Exception):
                    await self.link.client.zrem(key, member)
                return Answer.GONE
            try:
                outcome = await asyncio.wait_for(reply, self.confirm_within)
            except TimeoutError:
                log.warning("exec.approval_unconfirmed", holder=process, id=waiting_id)
                return Answer.UNCONFIRMED
            log.info("exec.approval_relayed", holder=process, id=waiting_id, outcome=str(outcome))
            return outcome
        finally:
            self._pending.pop(request_id, None)

    # -- the other processes' answers and confirmations -------------------------------------

    async def _listen(self) -> None:
        async def subscribed() -> None:
            self._subscribed.set()

        await self.link.listen(self.channel, self._on_message, subscribed)

    def _on_message(self, data: bytes | str) -> None:
        try:
            message: dict[str, Any] = json.loads(data)
            op = message["op"]
            if op == "answer":
                self._answer(message)
            elif op == "outcome":
                reply = self._pending.get(str(message["request"]))
                if reply is not None and not reply.done():
                    reply.set_result(Answer(message["outcome"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # A stray publish or another version's message: Redis itself is fine, go on.
            log.warning("cluster.approvals_bad_message", error=repr(exc))

    def _answer(self, message: dict[str, Any]) -> None:
        chat_id = message["chat"]
        chat: ChatKey = (str(chat_id[0]), str(chat_id[1]), str(chat_id[2]))
        approvals = self._approvals
        outcome = (
            Answer.GONE
            if approvals is None
            else approvals.resolve(
                chat,
                str(message["user"]),
                approve=bool(message["approve"]),
                waiting_id=int(message["id"]),
            )
        )
        log.info("exec.approval_answered_remotely", id=message["id"], outcome=str(outcome))
        confirmation = {"op": "outcome", "request": str(message["request"]), "outcome": outcome}
        self._spawn(self._publish(self._inbox(str(message["from"])), confirmation))

    async def _publish(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self.link.client.publish(channel, json.dumps(message))
        except Exception as exc:  # the answerer says "did not confirm"
            self.link.mark(False, exc)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        tasks = [t for t in (self._listener, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:  # bounded: a shutdown must not hang on a listener stuck in Redis's client
            _, stuck = await asyncio.wait(tasks, timeout=5.0)
            if stuck:
                log.warning("cluster.approvals_close_stuck", tasks=len(stuck))
        self._listener = None
        if self._approvals is not None and self._approvals.relay is self:
            self._approvals.relay = None
