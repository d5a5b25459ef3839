"""Table definitions, each a Core table declared as a class (``_table.py``: no ORM). The schema
itself is created by the Alembic migrations, never by ``metadata.create_all``;
``tests/bot/storage/test_db.py`` checks both agree."""

from __future__ import annotations

from datetime import UTC, datetime

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
from sqlalchemy.types import TypeDecorator

from bot.storage._table import TableRow, column

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


class Base(TableRow):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SessionRow(Base):
    __tablename__ = "sessions"

    key = column(String(255), primary_key=True)
    agent_id = column(String(255))
    user_id = column(String(255))
    channel = column(String(64))
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)
    model = column(String(255))
    provider = column(String(64))
    input_tokens = column(BigInteger(), default=0)
    output_tokens = column(BigInteger(), default=0)
    compaction_count = column(Integer(), default=0)
    summary = column(Text(), nullable=True)


class MessageRow(Base):
    __tablename__ = "messages"
    # (session_key, id) serves both the FK lookups and load_history's ORDER BY id.
    __table_args__ = (
        Index("ix_messages_session_key_id", "session_key", "id"),
        CheckConstraint(f"role IN {MESSAGE_ROLES!r}", name="role"),
    )

    id = column(BigIntId, primary_key=True, autoincrement=True)
    session_key = column(String(255), ForeignKey("sessions.key", ondelete="CASCADE"))
    run_id = column(String(255))
    role = column(String(16))
    content = column(Text())
    # [{"id", "name", "arguments"}]; NULL when the message has no tool calls.
    tool_calls = column(JSON(), nullable=True)
    tool_call_id = column(String(255), nullable=True)
    name = column(String(255), nullable=True)
    created_at = column(UTCDateTime(), default=utcnow)


class SummaryRow(Base):
    """One row per compaction, kept as history; ``sessions.summary`` holds the current one."""

    __tablename__ = "summaries"

    id = column(BigIntId, primary_key=True, autoincrement=True)
    session_key = column(String(255), ForeignKey("sessions.key", ondelete="CASCADE"), index=True)
    content = column(Text())
    message_count = column(Integer())  # messages the summary replaced
    created_at = column(UTCDateTime(), default=utcnow)


class TraceRow(Base):
    __tablename__ = "traces"
    __table_args__ = (Index("ix_traces_session_key_started_at", "session_key", "started_at"),)

    id = column(String(64), primary_key=True)
    run_id = column(String(255), index=True)
    session_key = column(String(255))
    agent_id = column(String(255))
    status = column(String(32))
    started_at = column(UTCDateTime(), index=True)
    ended_at = column(UTCDateTime(), nullable=True)
    input_tokens = column(BigInteger(), default=0)
    output_tokens = column(BigInteger(), default=0)
    error = column(Text(), nullable=True)
    output_preview = column(Text(), default="")
    input_preview = column(Text(), nullable=True)
    # A child or delegated run: the trace and the tool span that started it. No foreign key:
    # the parent trace is saved when the parent run ends, usually after its children.
    parent_trace_id = column(String(64), index=True, nullable=True)
    parent_span_id = column(String(64), nullable=True)


class SpanRow(Base):
    __tablename__ = "spans"

    id = column(String(64), primary_key=True)
    trace_id = column(String(64), ForeignKey("traces.id", ondelete="CASCADE"), index=True)
    # Index in Trace.spans: rebuilds the list exactly (the root first) even when two spans share
    # a started_at timestamp or the wall clock stepped back during the run.
    position = column(Integer())
    parent_id = column(String(64), nullable=True)
    kind = column(String(16))
    name = column(String(255))
    started_at = column(UTCDateTime())
    duration_ms = column(Float())
    error = column(Boolean())
    attributes = column(JSON())


class ChannelStateRow(Base):
    """Small per-channel key/value state that must survive restarts (e.g. polling offsets)."""

    __tablename__ = "channel_state"

    channel = column(String(64), primary_key=True)
    key = column(String(255), primary_key=True)
    value = column(Text())
    updated_at = column(UTCDateTime(), default=utcnow)


class ProcessedMessageRow(Base):
    """Inbound platform message ids already handled, so redeliveries are not answered twice."""

    __tablename__ = "processed_messages"

    key = column(String(255), primary_key=True)
    created_at = column(UTCDateTime(), default=utcnow, index=True)


class AgentRow(Base):
    """An agent defined at run time (``loopgate agents set``); NULL columns mean "not set here",
    so config.yaml or ``agents.defaults`` decide. ``settings`` holds the other agent keys."""

    __tablename__ = "agents"

    id = column(String(64), primary_key=True)
    provider = column(String(64), nullable=True)
    model = column(String(255), nullable=True)
    system_prompt = column(Text(), nullable=True)
    max_iterations = column(Integer(), nullable=True)
    context_window = column(Integer(), nullable=True)
    workspace = column(Text(), nullable=True)
    fallback_provider = column(String(64), nullable=True)
    fallback_model = column(String(255), nullable=True)
    settings = column(JSON(), default=dict)
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)


class MemoryFileRow(Base):
    """A memory file (MEMORY.md, memory/*.md) of a workspace as it was last indexed."""

    __tablename__ = "memory_files"

    workspace_key = column(String(1024), primary_key=True)
    path = column(String(1024), primary_key=True)
    mtime_ns = column(BigInteger())
    size = column(BigInteger())
    indexed_at = column(UTCDateTime(), default=utcnow)


class MemoryChunkRow(Base):
    """One heading-sized piece of a memory file. Full-text search is dialect-specific and
    lives in migration 0003 only: on SQLite the FTS5 table ``memory_chunks_fts`` (external
    content, kept in sync by triggers), on Postgres the generated ``search_vector`` column with
    a GIN index (see ``bot/storage/memory_index.py``)."""

    __tablename__ = "memory_chunks"
    __table_args__ = (Index("ix_memory_chunks_workspace_key_path", "workspace_key", "path"),)

    id = column(BigIntId, primary_key=True, autoincrement=True)
    workspace_key = column(String(1024))
    path = column(String(1024))
    chunk_no = column(Integer())
    heading = column(Text())
    start_line = column(Integer())
    end_line = column(Integer())
    content = column(Text())


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

    id = column(BigIntId, primary_key=True, autoincrement=True)
    session_key = column(String(255))
    agent_id = column(String(64))
    channel = column(String(64))
    message = column(JSON())
    state = column(String(16))
    reason = column(Text(), nullable=True)
    attempts = column(Integer(), default=0)
    answer = column(Text(), nullable=True)
    parts = column(JSON(), default=list)
    previews = column(JSON(), nullable=True)
    received_at = column(UTCDateTime())
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)
    owner = column(String(128), nullable=True)
    lease_until = column(UTCDateTime(), nullable=True)


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

    id = column(BigIntId, primary_key=True, autoincrement=True)
    source = column(String(64))
    target = column(String(64), index=True)
    direction = column(String(16))
    description = column(Text(), default="")
    created_at = column(UTCDateTime(), default=utcnow)


class TeamRow(Base):
    """A team (``loopgate teams``): a lead and members. ``members`` (JSON list, the lead not
    included) and ``settings`` (``{"shared_workspace": bool, "workspace_scope": "chat"|"user"}``)
    are JSON because nothing queries inside them: teams are few and read whole."""

    __tablename__ = "teams"

    id = column(String(64), primary_key=True)
    lead = column(String(64))
    members = column(JSON(), default=list)
    settings = column(JSON(), default=dict)
    description = column(Text(), default="")
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)


class TeamTaskRow(Base):
    """A task of a team's board. Its status changes only by compare-and-set UPDATEs
    (``bot/storage/orchestration.py``), so two agents can't both claim it. ``comments`` is a
    JSON list of ``{"author", "text", "at"}`` (ISO 8601)."""

    __tablename__ = "team_tasks"
    __table_args__ = (
        Index("ix_team_tasks_team_id_status", "team_id", "status"),
        CheckConstraint(f"status IN {TASK_STATUSES!r}", name="status"),
    )

    id = column(String(32), primary_key=True)
    team_id = column(String(64), ForeignKey("teams.id", ondelete="CASCADE"))
    title = column(Text())
    description = column(Text())
    status = column(String(16))
    created_by = column(String(64))
    assignee = column(String(64), nullable=True)
    result = column(Text(), nullable=True)
    comments = column(JSON(), default=list)
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)


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

    id = column(String(80), primary_key=True)
    agent_id = column(String(64))
    session_key = column(String(255))
    user_id = column(String(255))
    chat = column(String(255))
    origin = column(JSON())
    source = column(String(16))
    kind = column(String(8))
    spec = column(String(255))
    timezone = column(String(64))
    schedule = column(String(255))
    anchor = column(UTCDateTime(), nullable=True)
    message = column(Text())
    next_run_at = column(UTCDateTime(), nullable=True)
    paused = column(Boolean(), default=False)
    last_run_at = column(UTCDateTime(), nullable=True)
    last_outcome = column(String(255), nullable=True)
    last_entry = column(BigInteger(), nullable=True)
    """The inbox entry of the last occurrence: how its run ended is that entry's state."""
    created_at = column(UTCDateTime(), default=utcnow)
    updated_at = column(UTCDateTime(), default=utcnow)


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

    hour = column(UTCDateTime(), primary_key=True)
    agent_id = column(String(64), primary_key=True)
    channel = column(String(32), primary_key=True)
    user_id = column(String(255), primary_key=True)
    provider = column(String(64), primary_key=True)
    model = column(String(128), primary_key=True)
    input_tokens = column(BigInteger(), default=0)
    output_tokens = column(BigInteger(), default=0)
    cached_input_tokens = column(BigInteger(), default=0)
    cost_usd = column(Float(), default=0.0)
    runs = column(Integer(), default=0)
    calls = column(Integer(), default=0)
    unpriced_calls = column(Integer(), default=0)
