"""Table definitions. The schema itself is created by the Alembic migrations, never by
``metadata.create_all``; ``tests/bot/storage/test_db.py`` checks both agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Deterministic constraint names: SQLite batch migrations can only alter named constraints, and
# both backends then carry the same names.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

MESSAGE_ROLES = ("system", "user", "assistant", "tool")

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY (a rowid alias);
# BIGINT would stay NULL there, so the variant keeps ids working on both backends.
BigIntId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both backends.

    SQLite has no timezone type and hands back naive values; normalising to UTC on the way in
    and tagging UTC on the way out makes both backends return the same aware datetimes.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; storage expects timezone-aware UTC values")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SessionRow(Base):
    __tablename__ = "sessions"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    model: Mapped[str] = mapped_column(String(255))
    provider: Mapped[str] = mapped_column(String(64))
    input_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    compaction_count: Mapped[int] = mapped_column(Integer(), default=0)
    summary: Mapped[str | None] = mapped_column(Text())


class MessageRow(Base):
    __tablename__ = "messages"
    # (session_key, id) serves both the FK lookups and load_history's ORDER BY id.
    __table_args__ = (
        Index("ix_messages_session_key_id", "session_key", "id"),
        CheckConstraint(f"role IN {MESSAGE_ROLES!r}", name="role"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(
        String(255), ForeignKey("sessions.key", ondelete="CASCADE")
    )
    run_id: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text())
    # [{"id", "name", "arguments"}]; NULL when the message has no tool calls.
    tool_calls: Mapped[list[dict[str, str]] | None] = mapped_column(JSON())
    tool_call_id: Mapped[str | None] = mapped_column(String(255))
    name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SummaryRow(Base):
    """One row per compaction, kept as history; ``sessions.summary`` holds the current one."""

    __tablename__ = "summaries"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(
        String(255), ForeignKey("sessions.key", ondelete="CASCADE"), index=True
    )
    content: Mapped[str] = mapped_column(Text())
    message_count: Mapped[int] = mapped_column(Integer())  # messages the summary replaced
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TraceRow(Base):
    __tablename__ = "traces"
    __table_args__ = (Index("ix_traces_session_key_started_at", "session_key", "started_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(255), index=True)
    session_key: Mapped[str] = mapped_column(String(255))
    agent_id: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    input_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    error: Mapped[str | None] = mapped_column(Text())
    output_preview: Mapped[str] = mapped_column(Text(), default="")
    input_preview: Mapped[str | None] = mapped_column(Text())
    # A child or delegated run: the trace and the tool span that started it. No foreign key:
    # the parent trace is saved when the parent run ends, usually after its children.
    parent_trace_id: Mapped[str | None] = mapped_column(String(64), index=True)
    parent_span_id: Mapped[str | None] = mapped_column(String(64))


class SpanRow(Base):
    __tablename__ = "spans"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    trace_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("traces.id", ondelete="CASCADE"), index=True
    )
    # Index in Trace.spans: rebuilds the list exactly (the root first) even when two spans share
    # a started_at timestamp or the wall clock stepped back during the run.
    position: Mapped[int] = mapped_column(Integer())
    parent_id: Mapped[str | None] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_ms: Mapped[float] = mapped_column(Float())
    error: Mapped[bool] = mapped_column(Boolean())
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON())


class ChannelStateRow(Base):
    """Small per-channel key/value state that must survive restarts (e.g. polling offsets)."""

    __tablename__ = "channel_state"

    channel: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProcessedMessageRow(Base):
    """Inbound platform message ids already handled, so redeliveries are not answered twice."""

    __tablename__ = "processed_messages"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class AgentRow(Base):
    """An agent defined at run time (``loopgate agents set``); NULL columns mean "not set here",
    so config.yaml or ``agents.defaults`` decide. ``settings`` holds the other agent keys."""

    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    provider: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(255))
    system_prompt: Mapped[str | None] = mapped_column(Text())
    max_iterations: Mapped[int | None] = mapped_column(Integer())
    context_window: Mapped[int | None] = mapped_column(Integer())
    workspace: Mapped[str | None] = mapped_column(Text())
    fallback_provider: Mapped[str | None] = mapped_column(String(64))
    fallback_model: Mapped[str | None] = mapped_column(String(255))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON(), default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryFileRow(Base):
    """A memory file (MEMORY.md, memory/*.md) of a workspace as it was last indexed."""

    __tablename__ = "memory_files"

    workspace_key: Mapped[str] = mapped_column(String(1024), primary_key=True)
    path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    mtime_ns: Mapped[int] = mapped_column(BigInteger())
    size: Mapped[int] = mapped_column(BigInteger())
    indexed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryChunkRow(Base):
    """One heading-sized piece of a memory file. Full-text search is dialect-specific and
    lives in migration 0003 only: on SQLite the FTS5 table ``memory_chunks_fts`` (external
    content, kept in sync by triggers), on Postgres the generated ``search_vector`` column with
    a GIN index (see ``bot/storage/memory_index.py``)."""

    __tablename__ = "memory_chunks"
    __table_args__ = (Index("ix_memory_chunks_workspace_key_path", "workspace_key", "path"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    workspace_key: Mapped[str] = mapped_column(String(1024))
    path: Mapped[str] = mapped_column(String(1024))
    chunk_no: Mapped[int] = mapped_column(Integer())
    heading: Mapped[str] = mapped_column(Text())
    start_line: Mapped[int] = mapped_column(Integer())
    end_line: Mapped[int] = mapped_column(Integer())
    content: Mapped[str] = mapped_column(Text())


INBOX_STATES = ("queued", "running", "answered", "dropped", "failed", "expired")


class InboxRow(Base):
    """An inbound message that will get (or got) a run: written before the platform is
    acknowledged, so a deploy, a crash or an OOM kill can't lose it (``bot/inbox.py``).

    ``answer`` is saved before its first chunk goes out and ``parts`` holds the platform id of
    each chunk delivered, so a replay resumes delivery where it stopped instead of re-running.
    ``previews`` holds the platform ids of a streamed answer's preview messages while it
    streams, so a replay after a kill removes them instead of leaving a half answer visible.
    ``owner``/``lease_until`` say which process works on it and until when.
    """

    __tablename__ = "inbox"
    __table_args__ = (
        CheckConstraint(
            "state IN ('queued', 'running', 'answered', 'dropped', 'failed', 'expired')",
            name="state",
        ),
        Index("ix_inbox_state_id", "state", "id"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(String(255))
    agent_id: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(64))
    message: Mapped[dict[str, Any]] = mapped_column(JSON())
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text())
    attempts: Mapped[int] = mapped_column(Integer(), default=0)
    answer: Mapped[str | None] = mapped_column(Text())
    parts: Mapped[list[str]] = mapped_column(JSON(), default=list)
    previews: Mapped[list[str] | None] = mapped_column(JSON())
    received_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())


LINK_DIRECTIONS = ("outbound", "inbound", "bidirectional")
TASK_STATUSES = ("open", "assigned", "in_progress", "completed", "failed", "cancelled")


class AgentLinkRow(Base):
    """One agent may delegate to another (``loopgate links``); at most one link per ordered
    (source, target) pair. ``target`` is indexed: ``links_of`` matches either end."""

    __tablename__ = "agent_links"
    __table_args__ = (
        UniqueConstraint("source", "target", name="uq_agent_links_source_target"),
        CheckConstraint(f"direction IN {LINK_DIRECTIONS!r}", name="direction"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(64), index=True)
    direction: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text(), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TeamRow(Base):
    """A team (``loopgate teams``): a lead and members. ``members`` (JSON list, the lead not
    included) and ``settings`` (``{"shared_workspace": bool, "workspace_scope": "chat"|"user"}``)
    are JSON because nothing queries inside them: teams are few and read whole."""

    __tablename__ = "teams"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    lead: Mapped[str] = mapped_column(String(64))
    members: Mapped[list[str]] = mapped_column(JSON(), default=list)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON(), default=dict)
    description: Mapped[str] = mapped_column(Text(), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TeamTaskRow(Base):
    """A task of a team's board. Its status changes only by compare-and-set UPDATEs
    (``bot/storage/orchestration.py``), so two agents can't both claim it. ``comments`` is a
    JSON list of ``{"author", "text", "at"}`` (ISO 8601)."""

    __tablename__ = "team_tasks"
    __table_args__ = (
        Index("ix_team_tasks_team_id_status", "team_id", "status"),
        CheckConstraint(f"status IN {TASK_STATUSES!r}", name="status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    team_id: Mapped[str] = mapped_column(String(64), ForeignKey("teams.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(Text())
    description: Mapped[str] = mapped_column(Text())
    status: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str] = mapped_column(String(64))
    assignee: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[str | None] = mapped_column(Text())
    comments: Mapped[list[dict[str, str]]] = mapped_column(JSON(), default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CronJobRow(Base):
    """A scheduled job (``bot/scheduling``): made by the ``cron`` tool in a chat, or an agent's
    heartbeat. ``next_run_at`` is the next occurrence (None: a one-off that has run or was
    missed); each occurrence enters the inbox under the key (id, scheduled time), so it is
    run once whichever process fires it. ``origin`` is the message the job answers to (its
    chat, sender and message id), stored like an inbox entry's."""

    __tablename__ = "cron_jobs"
    __table_args__ = (
        CheckConstraint("kind IN ('once', 'every', 'cron')", name="kind"),
        Index("ix_cron_jobs_next_run_at", "next_run_at"),
        Index("ix_cron_jobs_user_id", "user_id"),
    )

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(64))
    session_key: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(255))
    chat: Mapped[str] = mapped_column(String(255))
    origin: Mapped[dict[str, Any]] = mapped_column(JSON())
    source: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(8))
    spec: Mapped[str] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64))
    schedule: Mapped[str] = mapped_column(String(255))
    anchor: Mapped[datetime | None] = mapped_column(UTCDateTime())
    message: Mapped[str] = mapped_column(Text())
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    paused: Mapped[bool] = mapped_column(Boolean(), default=False)
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_outcome: Mapped[str | None] = mapped_column(String(255))
    last_entry: Mapped[int | None] = mapped_column(BigInteger())
    """The inbox entry of the last occurrence: how its run ended is that entry's state."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class UsageHourRow(Base):
    """Model usage added up per UTC hour by agent, channel, user and model (docs/usage.md):
    what ``loopgate usage``, the dashboard, ``/usage`` and the budgets read, so that no span is
    scanned to answer "this month". ``cost_usd`` adds up the priced calls only;
    ``unpriced_calls`` counts the others (a model of unknown price costs null, not 0)."""

    __tablename__ = "usage_hourly"
    __table_args__ = (
        Index("ix_usage_hourly_user_id", "user_id", "hour"),
        Index("ix_usage_hourly_agent_id", "agent_id", "hour"),
    )

    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    channel: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    cached_input_tokens: Mapped[int] = mapped_column(BigInteger(), default=0)
    cost_usd: Mapped[float] = mapped_column(Float(), default=0.0)
    runs: Mapped[int] = mapped_column(Integer(), default=0)
    calls: Mapped[int] = mapped_column(Integer(), default=0)
    unpriced_calls: Mapped[int] = mapped_column(Integer(), default=0)
