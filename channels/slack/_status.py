"""Progress as the assistant thread status ("is thinking…", "is using read_file…").

Slack has no typing indicator for bots; in an assistant thread ``assistant.threads.setStatus``
plays that part. Nothing tells us when a run ends, so the status is cleared on the signals the
gateway does give: a terminal status reaction, or the run's reaction removed with no new one
following within :data:`STATUS_GRACE`. As a backstop (reactions may be off), a status that typing
stops refreshing expires after ``ttl``. A reply in the thread clears it on Slack's side.

Where Slack refuses the status (not an assistant thread, or an app without the scope), it is not
asked again: per thread, or for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack._errors import slack_error_code
from channels.slack._normalize import TERMINAL_EMOJI
from channels.slack._recent import BoundedDict
from channels.types import ChatRef

log = structlog.get_logger(__name__)

STATUS_GRACE = 0.3  # a removed reaction followed by no new one within this is the run's end
APP_WIDE_REFUSALS = ("missing_scope", "not_allowed_token_type", "unknown_method")

ThreadKey = tuple[str, str]  # (channel id, thread ts)


class Spawn(Protocol):
    """Starts a task the channel owns, so stopping the channel cancels it."""

    def __call__(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]: ...


def thread_key(chat: ChatRef) -> ThreadKey | None:
    return (chat.chat_id, chat.thread_id) if chat.thread_id else None


@dataclass(slots=True)
class _Status:
    text: str
    expiry: asyncio.Task[None] | None = None
    pending_clear: asyncio.Task[None] | None = None


class ThreadStatus:
    """The statuses shown in assistant threads, and when to clear them."""

    def __init__(
        self,
        client: AsyncWebClient,
        spawn: Spawn,
        *,
        enabled: bool,
        thinking: str,
        tool: str,
        ttl: float,
    ) -> None:
        self.client = client
        self.spawn = spawn
        self.disabled = not enabled
        self.thinking = thinking
        self.tool = tool  # {tool}: the tool's name
        self.ttl = ttl
        self._statuses: dict[ThreadKey, _Status] = {}
        self._off: BoundedDict[ThreadKey, bool] = BoundedDict()

    async def refresh(self, chat: ChatRef) -> None:
        """Show (or keep showing) the thread's status; called on every typing refresh."""
        key = thread_key(chat)
        if key is None or self.disabled or key in self._off:
            return
        status = self._statuses.get(key)
        text = status.text if status is not None else self.thinking
        if not await self._set(key, text):
            return
        status = self._statuses.setdefault(key, _Status(text))
        if status.expiry is not None:
            status.expiry.cancel()
        status.expiry = self.spawn(self._expire(key, self.ttl), name="slack:status-ttl")

    def show_progress(self, chat: ChatRef, tool: str | None, *, helpers: int = 0) -> None:
        key = thread_key(chat)
        if key is None or key not in self._statuses:
            return
        text = self.thinking if tool is None else self.tool.replace("{tool}", tool or "a tool")
        if helpers > 0:
            text = f"is waiting for {helpers} helper{'s' if helpers > 1 else ''}…"
        self.spawn(self._update_text(chat, text), name="slack:status-text")

    def reaction_added(self, chat: ChatRef, emoji: str) -> None:
        key = thread_key(chat)
        if key is None:
            return
        if emoji in TERMINAL_EMOJI:
            self.spawn(self._clear(key), name="slack:status-clear")
        else:
            self._cancel_pending_clear(key)

    def reaction_removed(self, chat: ChatRef) -> None:
        key = thread_key(chat)
        if key is not None and key in self._statuses:
            # The end of a run clears its reaction; a progress change adds the next one at once.
            self._schedule_clear(key, STATUS_GRACE)

    def replied(self, channel_id: str, thread_ts: str) -> None:
        # Slack clears the assistant status itself when the app replies in the thread.
        self._forget((channel_id, thread_ts))

    async def clear(self, channel_id: str, thread_ts: str) -> None:
        """Clear the thread's status now if one is shown (set again since our last reply)."""
        await self._clear((channel_id, thread_ts))

    def close(self) -> None:
        for status in self._statuses.values():
            for task in (status.expiry, status.pending_clear):
                if task is not None:
                    task.cancel()
        self._statuses.clear()

    async def _set(self, key: ThreadKey, text: str) -> bool:
        channel_id, thread_ts = key
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=channel_id, thread_ts=thread_ts, status=text
            )
        except SlackApiError as exc:
            code = slack_error_code(exc)
            if code in APP_WIDE_REFUSALS:
                self.disabled = True
            else:
                self._off[key] = True  # not an assistant thread, say
            log.info("slack.status_unavailable", error=code, channel=channel_id)
            return False
        except Exception as exc:
            log.info("slack.status_failed", error=str(exc), channel=channel_id)
            return False
        return True

    async def _update_text(self, chat: ChatRef, text: str) -> None:
        key = thread_key(chat)
        status = self._statuses.get(key) if key is not None else None
        if key is None or status is None or status.text == text:
            return
        status.text = text
        await self._set(key, text)

    def _schedule_clear(self, key: ThreadKey, delay: float) -> None:
        status = self._statuses.get(key)
        if status is None:
            return
        self._cancel_pending_clear(key)
        status.pending_clear = self.spawn(self._expire(key, delay), name="slack:status-clear")

    def _cancel_pending_clear(self, key: ThreadKey) -> None:
        status = self._statuses.get(key)
        if status is not None and status.pending_clear is not None:
            status.pending_clear.cancel()
            status.pending_clear = None

    async def _expire(self, key: ThreadKey, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._clear(key)

    async def _clear(self, key: ThreadKey) -> None:
        if self._forget(key) is not None:
            await self._set(key, "")

    def _forget(self, key: ThreadKey) -> _Status | None:
        status = self._statuses.pop(key, None)
        if status is None:
            return None
        # The expiry task clearing the status must not cancel itself mid-way.
        current = asyncio.current_task()
        for task in (status.expiry, status.pending_clear):
            if task is not None and task is not current:
                task.cancel()
        return status
