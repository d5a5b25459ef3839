"""Per-agent settings the loop runs with; the bot builds them from config.yaml."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent_core.exec_profile import ExecProfile
from agent_core.orchestration.modes import OrchestrationProfile

MAX_ITERATIONS = 20
CONTEXT_WINDOW = 200_000
MAX_MESSAGE_CHARS = 32_768
HISTORY_LIMIT_TURNS = 50
MAX_TOOL_CALLS = 100
MAX_PARALLEL_TOOLS = 4
CONTEXT_FILE_MAX_CHARS = 20_000
MAX_FILE_BYTES = 1 << 20  # 1 MiB: the most one write_file may write
WORKSPACE_MAX_BYTES = 100 << 20  # 100 MiB: the quota of one user's workspace
MAX_PARALLEL_CHILDREN = 4  # child runs of one batch running at once
MAX_SPAWN_DEPTH = 2  # a child may spawn, a grandchild may not
MAX_CHILDREN_PER_RUN = 8  # spawn/delegate/dispatch calls one run may make
CHILD_TIMEOUT = 600.0  # seconds a child run may take before it is cancelled


@dataclass(frozen=True, slots=True)
class PruningSettings:
    """Context pruning (spec section 6); ``mode: off`` disables it."""

    mode: str = ""  # "" or "cache-ttl": on; "off": disabled
    keep_last_assistants: int = 3  # the last N assistant messages (and what follows) are kept
    soft_trim_ratio: float = 0.3  # of the context window: soft-trim long tool results
    hard_clear_ratio: float = 0.5  # of the context window: clear very long tool results
    soft_trim_max_chars: int = 6_000  # tool results longer than this are soft-trimmed
    soft_trim_keep_chars: int = 3_000  # kept at each end of a soft-trimmed result
    min_prunable_tool_chars: int = 50_000  # results at least this long may be hard-cleared

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True, slots=True)
class MemoryFlushSettings:
    """The agent turn that saves durable memories before post-run compaction (section 8)."""

    enabled: bool = True
    max_iterations: int = 5
    timeout: float = 90.0  # seconds for the whole flush turn
    window: int = 10  # latest messages the flush turn sees
    prompt: str = (
        "Pre-compaction memory flush. Store durable memories now (use memory/YYYY-MM-DD.md; "
        "create memory/ if needed). If nothing to store, reply with NO_REPLY."
    )


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Mid-loop and post-run compaction (section 7)."""

    enabled: bool = True
    threshold: float = 0.75  # share of the context window that triggers compaction
    max_history_share: float | None = None  # overrides ``threshold`` when set
    min_messages: int = 50  # post-run: more stored messages than this triggers compaction
    keep_last: int = 4  # post-run: messages kept after the summary
    mid_loop_summarize_share: float = 0.7  # mid-loop: share of messages summarized
    summary_temperature: float = 0.3
    summary_max_tokens: int = 1024
    summary_timeout: float = 120.0  # seconds
    memory_flush: MemoryFlushSettings = field(default_factory=MemoryFlushSettings)

    @property
    def trigger_share(self) -> float:
        return self.max_history_share if self.max_history_share is not None else self.threshold


@dataclass(frozen=True, slots=True)
class AgentSettings:
    id: str
    model: str
    workspace: Path
    provider: str = "openai"
    max_iterations: int = MAX_ITERATIONS
    context_window: int = CONTEXT_WINDOW
    max_message_chars: int = MAX_MESSAGE_CHARS
    history_limit: int = HISTORY_LIMIT_TURNS
    vision: bool = True
    """Images go to the model as image parts; off: as a text note with the saved path."""
    timezone: str = "UTC"  # the prompt's Time section and the cron tool's schedules
    system_prompt: str = ""  # operator's extra instructions, appended to the built prompt
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    max_tool_calls: int = MAX_TOOL_CALLS  # tool calls one run may make, over all iterations
    max_parallel_tools: int = MAX_PARALLEL_TOOLS  # pool size for a read-only batch
    max_file_bytes: int = MAX_FILE_BYTES  # per write_file, in UTF-8 bytes
    workspace_max_bytes: int = WORKSPACE_MAX_BYTES  # per user workspace (files.py)
    fallback_provider: str | None = None  # name of the provider used when the primary fails
    fallback_model: str | None = None  # model on the fallback provider (default: ``model``)
    agent_type: str = "open"  # "open": per-user files; "predefined": agent-level files
    input_guard: str = "warn"  # off | log | warn | block (agent_core/input_guard.py)
    context_file_max_chars: int = CONTEXT_FILE_MAX_CHARS  # per bootstrap file in the prompt
    bootstrap_templates: Path | None = None  # folder overriding the built-in file templates
    owner_ids: tuple[str, ...] = ()  # user ids named as owners in the prompt
    extra_context: str = ""  # added to the prompt inside <extra_context>
    pruning: PruningSettings = field(default_factory=PruningSettings)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    orchestration: OrchestrationProfile = field(default_factory=OrchestrationProfile)
    max_parallel_children: int = MAX_PARALLEL_CHILDREN
    max_spawn_depth: int = MAX_SPAWN_DEPTH
    max_children_per_run: int = MAX_CHILDREN_PER_RUN
    child_timeout: float = CHILD_TIMEOUT
    # Folders of skills shared by every run (besides the workspace's skills/): readable, never
    # writable by the agent (agent_core/skills.py).
    skill_paths: tuple[Path, ...] = ()
    # Self-evolution (prompt section 7): true when the guardrails lock SOUL.md, so a predefined
    # agent is not invited to adjust its own style.
    soul_locked: bool = False
    # The most of SOUL.md one soul_update may rewrite (guardrails' max_delta_per_cycle).
    soul_max_delta: float = 0.1
    # The offered ``exec`` tool's sandbox and policy (prompt sections 5 and 14); None when the
    # agent has no ``exec`` (off, sandbox unavailable, or disabled for the agent).
    exec: ExecProfile | None = None
