"""An agent's resolved settings: its definition over ``agents.defaults`` and its providers.

The definition is the config.yaml entry merged with the database row (see :mod:`bot.agents.router`);
what it leaves unset comes from ``agents.defaults``, and a provider that no longer exists falls
back to the default one with a warning rather than failing every message of the agent.
"""

from __future__ import annotations

from typing import Any

import structlog

from agent_core import AgentSettings, CompactionSettings, MemoryFlushSettings, PruningSettings
from agent_core.orchestration import OrchestrationProfile
from bot.config import AgentConfig, AgentDefaults, Config
from bot.config.agents import resolve_guardrails

log = structlog.get_logger(__name__)


def agent_settings(
    config: Config,
    agent_id: str,
    agent: AgentConfig | None,
    profile: OrchestrationProfile | None = None,
) -> AgentSettings:
    """``agent`` is the merged definition (None: defaults only); ``profile`` its orchestration
    mode (default: spawn)."""
    defaults = config.agents.defaults
    providers = config.providers.all()
    provider_name = (agent and agent.provider) or config.providers.default
    if provider_name not in providers:  # a stored agent naming a provider since removed
        log.warning(
            "agent.unknown_provider",
            agent_id=agent_id,
            provider=provider_name,
            using=config.providers.default,
        )
        provider_name = config.providers.default
        agent = agent.model_copy(update={"model": None}) if agent else agent
    fallback_name = agent.fallback_provider if agent else None
    if fallback_name and fallback_name not in providers:
        log.warning("agent.unknown_provider", agent_id=agent_id, provider=fallback_name)
        fallback_name = None
    fallback_model = (agent and agent.fallback_model) or (
        providers[fallback_name].model if fallback_name else None
    )
    return AgentSettings(
        id=agent_id,
        provider=provider_name,
        model=(agent and agent.model) or providers[provider_name].model,
        workspace=(agent and agent.workspace) or defaults.workspace,
        max_iterations=(agent and agent.max_iterations) or defaults.max_iterations,
        context_window=(agent and agent.context_window) or defaults.context_window,
        max_message_chars=defaults.max_message_chars,
        history_limit=(agent and agent.history_limit) or defaults.history_limit,
        vision=defaults.vision if agent is None or agent.vision is None else agent.vision,
        timezone=(agent and agent.timezone) or config.cron.timezone,
        system_prompt=(agent and agent.system_prompt) or defaults.system_prompt,
        max_tokens=providers[provider_name].max_tokens,
        stream=defaults.stream,
        max_tool_calls=(agent and agent.max_tool_calls) or defaults.max_tool_calls,
        max_parallel_tools=defaults.max_parallel_tools,
        max_file_bytes=(agent and agent.max_file_bytes) or defaults.max_file_bytes,
        workspace_max_bytes=(agent and agent.workspace_max_bytes) or defaults.workspace_max_bytes,
        fallback_provider=fallback_name,
        fallback_model=fallback_model,
        orchestration=profile or OrchestrationProfile(),
        max_parallel_children=defaults.max_parallel_children,
        max_spawn_depth=defaults.max_spawn_depth,
        max_children_per_run=defaults.max_children_per_run,
        child_timeout=defaults.child_timeout,
        skill_paths=tuple(config.skills.paths),
        **context_settings(defaults, agent),
    )


def context_settings(defaults: AgentDefaults, agent: AgentConfig | None) -> dict[str, Any]:
    """Issue-5 settings (prompt, guard, pruning, compaction): per-agent keys over defaults."""
    pruning, compaction = defaults.context_pruning, defaults.compaction
    if agent and agent.context_pruning:
        pruning = pruning.model_copy(update=agent.context_pruning.model_dump(exclude_unset=True))
    if agent and agent.compaction:
        update = agent.compaction.model_dump(exclude_unset=True)
        flush = compaction.memory_flush
        if "memory_flush" in update:
            flush_update = agent.compaction.memory_flush.model_dump(exclude_unset=True)
            update["memory_flush"] = flush.model_copy(update=flush_update)
        compaction = compaction.model_copy(update=update)
    flush_cfg = compaction.memory_flush
    guardrails = resolve_guardrails(defaults, agent)
    flush_kw = flush_cfg.model_dump(exclude={"prompt"})
    if flush_cfg.prompt:
        flush_kw["prompt"] = flush_cfg.prompt
    return {
        "agent_type": (agent and agent.agent_type) or defaults.agent_type,
        "input_guard": (agent and agent.input_guard) or defaults.input_guard,
        "context_file_max_chars": defaults.context_file_max_chars,
        "bootstrap_templates": defaults.bootstrap_templates,
        "owner_ids": tuple(agent.owner_ids if agent and agent.owner_ids else defaults.owner_ids),
        "extra_context": (agent and agent.extra_context) or defaults.extra_context,
        "soul_locked": guardrails.soul_locked,
        "soul_max_delta": guardrails.max_delta_per_cycle,
        "pruning": PruningSettings(**pruning.model_dump()),
        "compaction": CompactionSettings(
            **compaction.model_dump(exclude={"memory_flush"}),
            memory_flush=MemoryFlushSettings(**flush_kw),
        ),
    }
