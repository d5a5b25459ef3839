"""Where the loop reads history and writes what a run produced. Implemented by the bot's storage."""

from __future__ import annotations

from typing import Protocol

from agent_core.messages import Message, SessionHistory, Usage
from agent_core.tracing import Trace


class SessionStore(Protocol):
    async def load_history(self, session_key: str) -> SessionHistory: ...

    async def append_run(
        self,
        session_key: str,
        messages: list[Message],
        *,
        run_id: str,
        usage: Usage,
        model: str,
        provider: str,
    ) -> None:
        """Write all messages of one run in one transaction and add its usage to the session."""

    async def set_summary(self, session_key: str, summary: str, keep_last: int) -> int:
        """Replace all but the last ``keep_last`` messages by ``summary`` (compaction counter
        + 1, a kept tail never starts with tool results); returns how many messages went."""


class TraceStore(Protocol):
    async def save_trace(self, trace: Trace) -> None: ...


class MemoryStore:
    """In-process store for tests, benchmarks and the in-memory mode."""

    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.usage: dict[str, Usage] = {}
        self.traces: list[Trace] = []
        self.summaries: dict[str, str] = {}
        self.compactions: dict[str, int] = {}

    async def load_history(self, session_key: str) -> SessionHistory:
        return SessionHistory(
            messages=list(self.sessions.get(session_key, ())),
            summary=self.summaries.get(session_key),
        )

    async def set_summary(self, session_key: str, summary: str, keep_last: int) -> int:
        if keep_last < 0:
            raise ValueError("keep_last must be >= 0")
        messages = self.sessions.get(session_key, [])
        kept = messages[len(messages) - keep_last :] if keep_last else []
        while kept and kept[0].role == "tool":
            kept.pop(0)
        removed = len(messages) - len(kept)
        self.sessions[session_key] = list(kept)
        self.summaries[session_key] = summary
        self.compactions[session_key] = self.compactions.get(session_key, 0) + 1
        return removed

    async def append_run(
        self,
        session_key: str,
        messages: list[Message],
        *,
        run_id: str,
        usage: Usage,
        model: str,
        provider: str,
    ) -> None:
        self.sessions.setdefault(session_key, []).extend(messages)
        self.usage.setdefault(session_key, Usage()).add(usage)

    async def save_trace(self, trace: Trace) -> None:
        self.traces.append(trace)
