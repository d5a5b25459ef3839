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


class TraceStore(Protocol):
    async def save_trace(self, trace: Trace) -> None: ...


class MemoryStore:
    """In-process store for tests, benchmarks and the in-memory mode."""

    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.usage: dict[str, Usage] = {}
        self.traces: list[Trace] = []

    async def load_history(self, session_key: str) -> SessionHistory:
        return SessionHistory(messages=list(self.sessions.get(session_key, ())))

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
