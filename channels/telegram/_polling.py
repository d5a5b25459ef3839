"""Long polling: ``getUpdates``, hand each update over in order, confirm the offset past it.

Telegram considers an update delivered once a later ``getUpdates`` names an offset past it, so
the offset moves (and is persisted, for a restart) only past updates the bot has taken. One it
did not take (:class:`~channels.errors.NotAccepted`) is fetched again, with those after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog
from telegram import Bot, Update

from channels.errors import ChannelError, NotAccepted, RetryAfter
from channels.intake import CLOSE_GRACE
from channels.protocol import PollGate, StateStore
from channels.telegram._errors import translate_telegram_errors
from channels.telegram._options import TelegramOptions

log = structlog.get_logger(__name__)

OFFSET_KEY = "polling_offset"


class Poller:
    def __init__(
        self,
        bot: Bot,
        options: TelegramOptions,
        state: StateStore,
        process: Callable[[Update], Awaitable[None]],
        gate: PollGate | None = None,
    ) -> None:
        self._bot = bot
        self._options = options
        self._state = state
        self._process = process
        self._gate = gate
        self._offset: int | None = None
        self._running = False
        self._handing_over = False  # a fetched batch is being handed to the bot
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._running = True
        self._task = asyncio.create_task(self._poll(), name="telegram:poll")

    async def stop(self) -> None:
        """End polling.

        A poller waiting in a long poll or a back-off is cancelled: nothing it fetched is pending,
        and an answer the cancelled getUpdates was about to read stays unconfirmed, so Telegram
        delivers it again. A poller handing a fetched batch over is let finish it (a few database
        inserts), as the protocol promises; only one that overruns the grace is cancelled, and
        its unconfirmed updates come again too.
        """
        self._running = False
        task, self._task = self._task, None
        if task is None:
            return
        if not self._handing_over:
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_GRACE)
        if not done:
            log.warning("telegram.poller_overran", grace=CLOSE_GRACE)
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("telegram.poller_failed")

    async def _poll(self) -> None:
        self._offset = await self._stored_offset()
        delay = self._options.retry_backoff
        while self._running:
            if self._gate is not None and not self._gate.holds():
                await self._gate.wait_turn()
                # The previous poller (another process) moved the offset meanwhile.
                self._offset = await self._stored_offset()
                log.info("telegram.poller_elected", offset=self._offset)
            try:
                with translate_telegram_errors():
                    updates = await self._bot.get_updates(
                        offset=self._offset,
                        timeout=self._options.polling_timeout,
                        allowed_updates=list(self._options.allowed_updates),
                    )
            except RetryAfter as exc:
                await asyncio.sleep(exc.retry_after)
                continue
            except Exception as exc:
                # Whatever it is, the poller lives on: a dead poller is a bot deaf until restart.
                error = str(exc) if isinstance(exc, ChannelError) else repr(exc)
                log.warning("telegram.poll_failed", error=error, retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if self._gate is not None and not self._gate.holds():
                # Lost the lease during the long poll: another process polls now. What this
                # batch holds is unconfirmed, so that process fetches it again.
                log.info("telegram.poller_lease_lost", dropped_unconfirmed=len(updates))
                continue
            self._handing_over = True
            try:
                await self._hand_over(updates)
            except NotAccepted as exc:
                if not self._running:
                    return
                # The offset stays before the refused update: the next getUpdates fetches it
                # (and those after it) again, in order.
                log.warning("telegram.not_accepted", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            finally:
                self._handing_over = False
            delay = self._options.retry_backoff

    async def _stored_offset(self) -> int | None:
        try:
            stored = await self._state.get(self._options.name, OFFSET_KEY)
        except Exception as exc:
            # Telegram itself remembers what was confirmed: without our copy, getUpdates starts
            # at the earliest unconfirmed update, which is where we would start anyway.
            log.warning("telegram.offset_unreadable", error=repr(exc))
            return None
        return int(stored) if stored else None

    async def _hand_over(self, updates: Sequence[Update]) -> None:
        """Hand ``updates`` to the bot in order; stops at the first one it does not take."""
        start = self._offset
        try:
            for update in updates:
                await self._process(update)
                self._offset = update.update_id + 1
        finally:
            if self._offset != start:
                await self._save_offset()

    async def _save_offset(self) -> None:
        # Once per batch: a restart resumes after the last update handed over. The updates of
        # a batch cut short by a crash are fetched again, and their dedupe keys skip them.
        try:
            await self._state.set(self._options.name, OFFSET_KEY, str(self._offset))
        except Exception as exc:
            # The bot has the update; the next getUpdates confirms it all the same.
            log.warning("telegram.offset_not_saved", offset=self._offset, error=repr(exc))
