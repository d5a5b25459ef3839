"""Status reactions on the user's message: 👀 on receipt, progress while working, then cleanup.

Only one status emoji is shown at a time. Intermediate states are debounced (a burst of tool
calls should not become a burst of API calls); the terminal state is never dropped.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Literal

import structlog

from agent_core import cancel_and_wait
from channels import Channel, MessageRef

log = structlog.get_logger(__name__)


class ReactionState(enum.StrEnum):
    RECEIVED = "received"
    THINKING = "thinking"
    TOOL = "tool"
    DONE = "done"
    ERROR = "error"


EMOJI: dict[ReactionState, str] = {
    ReactionState.RECEIVED: "👀",
    ReactionState.THINKING: "🤔",
    ReactionState.TOOL: "👨‍💻",
    ReactionState.DONE: "👍",
    ReactionState.ERROR: "😢",
}


class StatusReactions:
    def __init__(
        self,
        channel: Channel,
        message: MessageRef,
        *,
        enabled: bool = True,
        cleanup: Literal["clear", "final"] = "clear",
        debounce: float = 0.7,
    ) -> None:
        self.channel = channel
        self.message = message
        self.enabled = enabled and channel.capabilities.reactions
        self.cleanup_mode = cleanup
        self.debounce = debounce
        self._shown: str | None = None
        self._pending: ReactionState | None = None
        self._flush: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._finished = False
        self._receipt: asyncio.Task[None] | None = None

    async def received(self) -> None:
        if self.enabled:
            await self._show(EMOJI[ReactionState.RECEIVED])

    def received_soon(self) -> None:
        """👀 in the background: the run starts meanwhile instead of after its round-trip.
        :meth:`receipt_shown` waits for it (before the answer goes out), :meth:`finish` too."""
        if self.enabled and self._receipt is None:
            self._receipt = asyncio.create_task(self.received(), name="reaction:received")

    async def receipt_shown(self) -> None:
        """Wait for :meth:`received_soon`'s 👀, so it never lands after the answer."""
        receipt = self._receipt
        if receipt is None or receipt.done():
            return
        try:
            # shield: a /stop cancelling the turn must not cut the reaction's request in half.
            await asyncio.shield(receipt)
        except asyncio.CancelledError:
            if not receipt.cancelled():
                raise  # we were cancelled, not the receipt (which only a shutdown cancels)

    async def recover(self) -> None:
        """Replace whatever status an earlier process left on the message by 👀.

        Which emoji it showed is unknown; on platforms where reactions add up (Slack) each
        in-progress one is removed, then 👀 is shown as for a new message.
        """
        if not self.enabled:
            return
        for state in (ReactionState.THINKING, ReactionState.TOOL):
            try:
                await self.channel.remove_reaction(self.message, EMOJI[state])
            except Exception as exc:
                log.debug("reaction.recover_failed", channel=self.channel.name, error=str(exc))
        await self.received()

    def progress(self, state: ReactionState) -> None:
        """Schedule an intermediate state; only the latest one within ``debounce`` is shown."""
        if not self.enabled or self._finished:
            return
        self._pending = state
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.debounce)
        state, self._pending = self._pending, None
        if state is not None and not self._finished:
            await self._show(EMOJI[state])

    async def finish(self, ok: bool) -> None:
        """Terminal state: clear the status, or leave ✅-style final state when configured."""
        if not self.enabled or self._finished:
            return
        self._finished = True
        await self.receipt_shown()  # its 👀 is shown before being cleared
        if self._flush is not None and not self._flush.done():
            await cancel_and_wait(self._flush)  # a /stop meanwhile still stops the run
        if self.cleanup_mode == "final":
            await self._show(EMOJI[ReactionState.DONE if ok else ReactionState.ERROR])
        else:
            await self._show(None)

    async def _show(self, emoji: str | None) -> None:
        async with self._lock:
            if emoji == self._shown:
                return
            try:
                if self._shown is not None:
                    await self.channel.remove_reaction(self.message, self._shown)
                    self._shown = None
                if emoji is not None:
                    await self.channel.add_reaction(self.message, emoji)
                    self._shown = emoji
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("reaction.failed", channel=self.channel.name, error=str(exc))


CLEANUP_GRACE = 5.0
"""Seconds a shutdown waits for the status cleanups still under way (one platform call each)."""


class ReactionCleanups:
    """Status cleanups that follow their turn instead of ending it.

    A turn ends once its answer is sent and recorded. Its last reaction call (👀 taken off, or
    the final emoji) is cosmetic and costs a platform round trip: awaited inside the turn, it
    kept the session busy that long, so a chat's next message started that much later, and in
    a cluster the session was handed back that much later (a message arriving meanwhile at
    another process had to be stored there and claimed here). :meth:`aclose` lets the ones
    under way finish while the channels are still open.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def finish_soon(self, reactions: StatusReactions, *, ok: bool) -> None:
        if not reactions.enabled:
            return  # nothing to send: no task per turn where reactions are off
        task = asyncio.create_task(reactions.finish(ok=ok), name="reaction:finish")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("reaction.cleanup_failed", error=repr(exc))

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def flushed(self, grace: float | None = None) -> set[asyncio.Task[None]]:
        """Wait for the cleanups under way (up to ``grace`` seconds); returns those still
        running."""
        if not self._tasks:
            return set()
        _, late = await asyncio.wait(set(self._tasks), timeout=grace)
        return late

    async def aclose(self, grace: float = CLEANUP_GRACE) -> None:
        """Wait up to ``grace`` seconds for the cleanups under way; cancel what is left."""
        late = await self.flushed(grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
