"""The ``agents:`` section: defaults, one entry per agent, and the context settings they share.

An agent is an entry of ``agents.list`` (``{id: main, ...}``) or, the same thing, a key under
``agents`` (``agents.main: {...}``). Unset fields of an agent fall back to ``agents.defaults``.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any, Literal

from pydantic import ByteSize, Field, field_validator, model_validator

from bot.config.base import StrictModel
from bot.config.cron import HeartbeatConfig, check_time_zone
from bot.config.evolution import EvolutionGuardrails
from bot.config.usage import BudgetConfig

SETTABLE = ("provider", "model", "system_prompt", "max_iterations")
"""AgentConfig fields an operator may change at run time (``loopgate agents set``, the
dashboard): stored in the database over the config.yaml entry."""


class ContextPruningConfig(StrictModel):
    """Context pruning (agent-loop spec section 6); ``mode: off`` disables it."""

    mode: Literal["", "cache-ttl", "off"] = ""
    keep_last_assistants: int = Field(3, ge=0)
    soft_trim_ratio: float = Field(0.3, gt=0, le=1)
    hard_clear_ratio: float = Field(0.5, gt=0, le=1)
    soft_trim_max_chars: int = Field(6_000, ge=100)
    soft_trim_keep_chars: int = Field(3_000, ge=10)
    min_prunable_tool_chars: int = Field(50_000, ge=0)

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML 1.1 reads a bare ``off`` as False


class MemoryFlushConfig(StrictModel):
    """The memory-saving agent turn before post-run compaction (spec section 8)."""

    enabled: bool = True
    max_iterations: int = Field(5, ge=1, le=50)
    timeout: float = Field(90.0, gt=0)
    window: int = Field(10, ge=1)
    prompt: str | None = None
    """Default: the spec's "Pre-compaction memory flush. ..." prompt."""


class CompactionConfig(StrictModel):
    """Mid-loop and post-run compaction (spec section 7)."""

    enabled: bool = True
    threshold: float = Field(0.75, gt=0, le=1)
    max_history_share: float | None = Field(None, gt=0, le=1)
    min_messages: int = Field(50, ge=2)
    keep_last: int = Field(4, ge=0)
    mid_loop_summarize_share: float = Field(0.7, gt=0, lt=1)
    summary_temperature: float = Field(0.3, ge=0, le=2)
    summary_max_tokens: int = Field(1024, ge=16)
    summary_timeout: float = Field(120.0, gt=0)
    memory_flush: MemoryFlushConfig = Field(default_factory=MemoryFlushConfig)


class AgentDefaults(StrictModel):
    max_iterations: int = Field(20, ge=1, le=200)
    context_window: int = Field(200_000, ge=1000)
    workspace: Path = Path("./data/workspaces")
    max_message_chars: int = Field(32_768, ge=100)
    history_limit: int = Field(50, ge=1)
    """How many past user turns the model sees."""
    vision: bool = True
    """Images a user sends go to the model as image parts; off: as a text note with the
    saved path (for a model without vision)."""
    system_prompt: str = ""
    stream: bool = True
    max_tool_calls: int = Field(100, ge=1)
    """Tool calls one run may make over all its iterations; later calls get an error result."""
    max_parallel_tools: int = Field(4, ge=1, le=64)
    """How many read-only tool calls of one batch run at once."""
    max_file_bytes: ByteSize = Field(ByteSize(1 << 20), gt=0)
    """Most bytes one ``write_file`` may write (bytes, or ``512KiB``, ``1MiB``, ``2MB``)."""
    workspace_max_bytes: ByteSize = Field(ByteSize(100 << 20), gt=0)
    """Quota of one user's workspace; a write that would pass it is a tool error."""
    agent_type: Literal["open", "predefined"] = "open"
    """``open``: per-user bootstrap files; ``predefined``: agent-level files + per-user USER.md."""
    input_guard: Literal["off", "log", "warn", "block"] = "warn"
    """Prompt-injection scan of user messages; ``block`` refuses them without a model call."""
    context_file_max_chars: int = Field(20_000, ge=0)
    """Characters of one bootstrap file (AGENTS.md, MEMORY.md...) put in the prompt."""
    bootstrap_templates: Path | None = None
    """Folder whose AGENTS.md, SOUL.md... replace the built-in templates for new workspaces."""
    owner_ids: list[str] = Field(default_factory=list)
    extra_context: str = ""
    """Added to every system prompt inside ``<extra_context>``."""
    context_pruning: ContextPruningConfig = Field(default_factory=ContextPruningConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    max_parallel_children: int = Field(4, ge=1, le=64)
    """Child runs (spawn, delegate, team task) of one tool batch running at once."""
    max_spawn_depth: int = Field(2, ge=0, le=8)
    """How deep runs may nest: 2 lets a child spawn once more; 0 disables spawning."""
    max_children_per_run: int = Field(8, ge=0, le=100)
    """Child runs one run may start; further calls get a tool error."""
    child_timeout: float = Field(600.0, gt=0)
    """Seconds a child run may take before it is stopped and reported as failed."""
    mcp_inline_max: int = Field(40, ge=0)
    """Up to this many MCP tools are offered to the model directly; above it, the model
    finds them with ``mcp_tool_search``."""
    evolution_guardrails: EvolutionGuardrails = Field(default_factory=EvolutionGuardrails)
    """Limits of self-evolution suggestions (bot/evolution); per agent key by key."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """What each agent may spend (USD per day and month, all users together; 0: unlimited)."""


class AgentConfig(StrictModel):
    """One agent; unset fields fall back to ``agents.defaults``."""

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    provider: str | None = None
    model: str | None = None
    max_iterations: int | None = Field(None, ge=1, le=200)
    context_window: int | None = Field(None, ge=1000)
    workspace: Path | None = None
    system_prompt: str | None = None
    fallback_provider: str | None = None
    """Provider used (with the same retries) when ``provider`` fails for good."""
    fallback_model: str | None = None
    """Model on the fallback provider; default: that provider's ``model``."""
    max_tool_calls: int | None = Field(None, ge=1)
    max_file_bytes: ByteSize | None = Field(None, gt=0)
    workspace_max_bytes: ByteSize | None = Field(None, gt=0)
    agent_type: Literal["open", "predefined"] | None = None
    input_guard: Literal["off", "log", "warn", "block"] | None = None
    history_limit: int | None = Field(None, ge=1)
    vision: bool | None = None
    owner_ids: list[str] | None = None
    extra_context: str | None = None
    context_pruning: ContextPruningConfig | None = None
    """Keys set here override ``agents.defaults.context_pruning`` one by one."""
    compaction: CompactionConfig | None = None
    """Keys set here override ``agents.defaults.compaction`` one by one."""
    mcp_servers: list[str] | None = None
    """Names under ``mcp.servers`` this agent may use; default: every enabled one."""
    evolution_guardrails: EvolutionGuardrails | None = None
    """Keys set here override ``agents.defaults.evolution_guardrails`` one by one."""
    disabled_tools: list[str] | None = None
    """Tools this agent is never offered (a call is refused with the reason); set by an
    approved ``ToolFailureRule`` suggestion or by hand."""
    timezone: str | None = None
    """Overrides ``cron.timezone`` for this agent (its schedules and its prompt's Time)."""
    heartbeat: HeartbeatConfig | None = None
    """Off unless set: the agent's HEARTBEAT.md checklist as a scheduled job
    (docs/scheduling.md)."""
    budget: BudgetConfig | None = None
    """``{daily_usd, monthly_usd}`` this agent may spend; replaces ``agents.defaults.budget``."""

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return None if value is None else check_time_zone(value)


class AgentsConfig(StrictModel):
    default: str = "main"
    cache_ttl: float = Field(300.0, ge=0)
    """Seconds a resolved agent is reused before it is rebuilt from config and the database."""
    defaults: AgentDefaults = Field(default_factory=AgentDefaults)
    list: builtins.list[AgentConfig] = Field(default_factory=builtins.list)

    @model_validator(mode="before")
    @classmethod
    def _agents_by_id(cls, data: Any) -> Any:
        """``agents.<id>: {...}`` is the same as an entry ``{id: <id>, ...}`` of ``agents.list``."""
        if not isinstance(data, dict):
            return data
        own = {"default", "cache_ttl", "defaults", "list"}
        named = {k: v for k, v in data.items() if k not in own and isinstance(v, dict)}
        if not named:
            return data
        listed = data.get("list") or []
        ids = {str(entry.get("id")) for entry in listed if isinstance(entry, dict)}
        if clash := sorted(ids & set(named)):
            raise ValueError(f"agent {clash[0]!r} is defined both under agents.list and agents.*")
        rest = {k: v for k, v in data.items() if k not in named}
        return {**rest, "list": [*listed, *({"id": k, **v} for k, v in named.items())]}


def resolve_guardrails(defaults: AgentDefaults, agent: AgentConfig | None) -> EvolutionGuardrails:
    """Key by key, like ``context_pruning``: ``agents.<id>.evolution_guardrails`` overrides
    ``agents.defaults.evolution_guardrails`` only in the keys it sets."""
    base = defaults.evolution_guardrails
    if agent is None or agent.evolution_guardrails is None:
        return base
    return base.model_copy(update=agent.evolution_guardrails.model_dump(exclude_unset=True))
