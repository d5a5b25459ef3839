"""What one evolution cycle (:mod:`.cycle`) needs of the service that runs it.

:class:`~bot.evolution.service.EvolutionService` satisfies :class:`CycleHost`; the cycle depends
on this protocol instead of the service, so the two modules don't import each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from bot.config import Config
from bot.evolution.apply import AgentView
from bot.evolution.records import AgentMetrics, Suggestion, SuggestionStatus
from bot.evolution.rules import Rule
from bot.evolution.store import SuggestionStore
from bot.storage import Database, SqlAgentStore


class AgentCache(Protocol):
    """The router's cache of built agents: one changed agent is built again."""

    def invalidate(self, agent_id: str | None = None) -> None: ...


class CycleHost(Protocol):
    @property
    def db(self) -> Database: ...

    @property
    def config(self) -> Config: ...

    @property
    def router(self) -> AgentCache | None: ...

    @property
    def rules(self) -> Sequence[Rule]: ...

    @property
    def store(self) -> SuggestionStore: ...

    @property
    def agents(self) -> SqlAgentStore: ...

    @property
    def window(self) -> timedelta: ...

    async def move(
        self, suggestion: Suggestion, expected: SuggestionStatus, **changes: object
    ) -> Suggestion: ...

    async def metrics_between(
        self, agent_id: str, start: datetime, end: datetime
    ) -> AgentMetrics: ...

    async def memory_files(self, view: AgentView) -> int: ...
