"""Compaction (spec section 7): summaries that replace old history.

- **Mid-loop** (:func:`compact_messages`): when a run's request reaches the trigger share of the
  context window, the oldest ~70% of its in-memory messages become one summary, once per run.
  Only the request shrinks; the session is untouched until post-run.
- **Post-run** (:class:`Compactor`): when a session has more than ``min_messages`` messages or
  its estimated tokens pass the trigger share, a background task takes the session's
  non-blocking lock (a second run finding it taken skips), runs the memory flush, asks the
  model for a summary (temperature 0.3, max 1024 tokens, 120 s) and stores it, keeping the last
  ``keep_last`` messages; the store increments the compaction counter. With several
  processes the lock is also taken in :class:`~agent_core.locks.SharedLocks` (a session's runs
  may end in different processes); a session locked elsewhere, or a lock service that cannot
  be reached, skips this compaction: the next run tries again.

The next run sees the summary as two opening messages (:func:`summary_messages`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from agent_core.errors import AgentError
from agent_core.locks import Lease, SharedLocks
from agent_core.messages import Message
from agent_core.providers.base import ModelRequest, Provider
from agent_core.sanitize import sanitize_output
from agent_core.settings import CompactionSettings
from agent_core.store import SessionStore

log = structlog.get_logger(__name__)

SUMMARY_PREFIX = "[Summary of earlier conversation]\n"
SUMMARY_ACK = "I understand the context of our earlier conversation."
SUMMARY_INSTRUCTIONS = (
    "You compress conversations. Write a concise summary of the conversation below for the "
    "assistant that will continue it: the user's goals, facts and preferences they gave, "
    "decisions made, work done (files, tool results that matter) and open questions. Plain "
    "text, no preamble, at most about 600 words."
)
TRANSCRIPT_ITEM_CHARS = 2_000  # per message in the text handed to the summarizer


class NotCompacted(AgentError):
    """Nothing was compacted (no clean split point, or the summary came back empty)."""


def summary_messages(summary: str) -> list[Message]:
    return [Message.user(SUMMARY_PREFIX + summary), Message.assistant(SUMMARY_ACK)]


def _is_clean_split(messages: Sequence[Message], i: int) -> bool:
    """Cutting before ``i`` breaks no tool call/result pair."""
    if i <= 0 or i >= len(messages) or messages[i].role == "tool":
        return False
    prev = messages[i - 1]
    return not (prev.role == "assistant" and prev.tool_calls)


def find_split(messages: Sequence[Message], target: int) -> int | None:
    """The clean split index nearest ``target`` that starts a user turn, or None.

    History made only of tool calls and results has no such point: nothing is compacted.
    """
    order = sorted(range(1, len(messages)), key=lambda i: (abs(i - target), -i))
    for i in order:
        if messages[i].role == "user" and _is_clean_split(messages, i):
            return i
    return None


def render_transcript(messages: Sequence[Message], previous_summary: str | None = None) -> str:
    lines: list[str] = []
    if previous_summary:
        lines.append(f"Earlier summary:\n{previous_summary}\n")
    for m in messages:
        text = (
            m.content
            if len(m.content) <= TRANSCRIPT_ITEM_CHARS
            else (m.content[:TRANSCRIPT_ITEM_CHARS] + " [...]")
        )
        if m.role == "tool":
            lines.append(f"Tool result ({m.name}): {text}")
        elif m.role == "assistant" and m.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments[:200]})" for c in m.tool_calls)
            lines.append(f"Assistant: {text}\n[called {calls}]".strip())
        else:
            lines.append(f"{m.role.title()}: {text}")
    return "\n".join(lines)


async def summarize(
    provider: Provider,
    model: str,
    messages: Sequence[Message],
    settings: CompactionSettings,
    *,
    previous_summary: str | None = None,
) -> str:
    request = ModelRequest(
        model=model,
        messages=[
            Message.system(SUMMARY_INSTRUCTIONS),
            Message.user(render_transcript(messages, previous_summary)),
        ],
        stream=False,
        temperature=settings.summary_temperature,
        max_tokens=settings.summary_max_tokens,
    )
    async with asyncio.timeout(settings.summary_timeout):
        response = await provider.complete(request)
    summary = sanitize_output(response.content).strip()
    if not summary:
        raise NotCompacted("the summary came back empty")
    return summary


def split_summary(messages: Sequence[Message]) -> tuple[list[Message], str | None, list[Message]]:
    """``(leading system messages, injected summary or None, the rest)``."""
    i = 0
    while i < len(messages) and messages[i].role == "system":
        i += 1
    head, body = list(messages[:i]), list(messages[i:])
    if len(body) >= 2 and body[0].role == "user" and body[0].content.startswith(SUMMARY_PREFIX):
        return head, body[0].content[len(SUMMARY_PREFIX) :], body[2:]
    return head, None, body


async def compact_messages(
    messages: Sequence[Message],
    provider: Provider,
    model: str,
    settings: CompactionSettings,
) -> list[Message]:
    """Mid-loop: summarize ~``mid_loop_summarize_share`` of the non-system messages in place.

    Raises :class:`NotCompacted` when there is no clean split point.
    """
    head, previous, body = split_summary(messages)
    split = find_split(body, round(len(body) * settings.mid_loop_summarize_share))
    if split is None:
        raise NotCompacted("no clean split point")
    summary = await summarize(provider, model, body[:split], settings, previous_summary=previous)
    return [*head, *summary_messages(summary), *body[split:]]


def post_run_split(messages: Sequence[Message], keep_last: int) -> int | None:
    """Index of the first kept message: about ``keep_last`` from the end, never a tool result."""
    split = max(len(messages) - keep_last, 0)
    while split < len(messages) and messages[split].role == "tool":
        split += 1
    return split if split > 0 else None


_NEVER = "\x00never"
FlushHook = Callable[[list[Message]], Awaitable[object]]


def _end_cycle(flushed: dict[str, str | None] | None, session_key: str) -> None:
    """Forget the session's flush mark once its summary changed: the mark only ever matches
    the summary it was set with, and kept, there would be one per session that ever compacted,
    for the life of the process."""
    if flushed is not None:
        flushed.pop(session_key, None)


async def compact_session(
    store: SessionStore,
    session_key: str,
    provider: Provider,
    model: str,
    settings: CompactionSettings,
    *,
    flush: FlushHook | None = None,
    flushed: dict[str, str | None] | None = None,
) -> int:
    """Flush memories, summarize all but the last ``keep_last`` messages, store the summary.

    Returns how many messages the store removed. Messages appended by concurrent runs while
    the summary was being written are kept (they are not in the summary).
    """
    history = await store.load_history(session_key)
    messages = history.messages
    split = post_run_split(messages, settings.keep_last)
    if split is None:
        raise NotCompacted("nothing old enough to summarize")
    # Once per compaction cycle: a cycle ends when a new summary is stored.
    cycle_done = flushed is not None and flushed.get(session_key, _NEVER) == history.summary
    if flush is not None and settings.memory_flush.enabled and not cycle_done:
        await flush(messages)
        if flushed is not None:
            flushed[session_key] = history.summary
    summary = await summarize(
        provider, model, messages[:split], settings, previous_summary=history.summary
    )
    now = await store.load_history(session_key)
    appended = len(now.messages) - len(messages)
    if appended < 0 or now.summary != history.summary:
        _end_cycle(flushed, session_key)
        raise NotCompacted("the session changed under us (reset or compacted elsewhere)")
    removed = await store.set_summary(session_key, summary, len(messages) - split + appended)
    _end_cycle(flushed, session_key)
    log.info(
        "compaction.done",
        session_key=session_key,
        removed=removed,
        kept=len(messages) - split + appended,
    )
    return removed


class Compactor:
    """Post-run compaction for one agent, with a per-session non-blocking lock."""

    def __init__(self, settings: CompactionSettings, locks: SharedLocks | None = None) -> None:
        self.settings = settings
        self.locks = locks
        self._active: set[str] = set()  # sessions being compacted (the try-lock)
        self._tasks: set[asyncio.Task[None]] = set()
        self.completed = 0  # compactions finished by this instance (tests, metrics)

    def token_trigger(self, context_window: int) -> float:
        """The tokens past which compaction is due (post-run; mid-loop from this many on)."""
        return context_window * self.settings.trigger_share

    def should_compact(self, message_count: int, tokens: int, context_window: int) -> bool:
        if not self.settings.enabled:
            return False
        return self.too_many_messages(message_count) or tokens > self.token_trigger(context_window)

    def too_many_messages(self, message_count: int) -> bool:
        """Compaction is due by the message count alone (no tokens need counting)."""
        return self.settings.enabled and message_count > self.settings.min_messages

    @property
    def pending(self) -> bool:
        """Background compactions are still running."""
        return bool(self._tasks)

    def is_compacting(self, session_key: str) -> bool:
        return session_key in self._active

    def try_start(self, session_key: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Start ``work`` in the background unless this session is already being compacted."""
        if session_key in self._active:
            log.info("compaction.skipped", session_key=session_key, reason="already running")
            return False
        self._active.add(session_key)

        async def guarded() -> None:
            lease: Lease | None = None
            try:
                if self.locks is not None:
                    lease = await self._shared_lock(session_key)
                    if lease is None:
                        return
                await work()
            except asyncio.CancelledError:
                raise
            except NotCompacted as exc:
                log.info("compaction.not_compacted", session_key=session_key, reason=str(exc))
            except Exception:
                log.exception("compaction.failed", session_key=session_key)
            finally:
                if lease is not None:
                    await lease.release()
                self._active.discard(session_key)

        task = asyncio.create_task(guarded(), name=f"compaction:{session_key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _shared_lock(self, session_key: str) -> Lease | None:
        assert self.locks is not None
        try:
            lease = await self.locks.try_acquire(f"compaction:{session_key}")
        except Exception as exc:
            log.warning(
                "compaction.skipped",
                session_key=session_key,
                reason="lock unavailable",
                error=repr(exc),
            )
            return None
        if lease is None:
            log.info("compaction.skipped", session_key=session_key, reason="running elsewhere")
        return lease

    async def wait_idle(self) -> None:
        """Wait for every background compaction started so far (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.wait_idle()
