"""Persistent storage of the bot: SQLAlchemy 2 Core on SQLite (default) or Postgres.

``open_database`` connects and migrates the schema to head; the stores take the returned
:class:`Database`.
"""

from bot.storage._agents import SqlAgentStore, StoredAgent
from bot.storage._db import DEFAULT_DATABASE_URL, Database, head_revision, open_database
from bot.storage._errors import SessionNotFound, StorageError
from bot.storage._evolution_rows import MetricSnapshotRow, SuggestionRow
from bot.storage._sessions import SessionInfo, SqlSessionStore
from bot.storage._state import SqlChannelState, SqlDedupeStore
from bot.storage.orchestration import SqlOrchestrationStore
from bot.storage.traces import SqlTraceStore

__all__ = [
    "DEFAULT_DATABASE_URL",
    "Database",
    "MetricSnapshotRow",
    "SessionInfo",
    "SessionNotFound",
    "SqlAgentStore",
    "SqlChannelState",
    "SqlDedupeStore",
    "SqlOrchestrationStore",
    "SqlSessionStore",
    "SqlTraceStore",
    "StorageError",
    "StoredAgent",
    "SuggestionRow",
    "head_revision",
    "open_database",
]
