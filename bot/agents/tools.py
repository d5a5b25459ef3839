"""Each agent's tool set, built by the router when it resolves the agent (agent-loop spec,
section 10): its own copy of the shared registry plus its custom tools, its MCP servers' tools,
its orchestration mode's tools, the self-evolution, ``cron``, web and ``send_file`` tools, and
``exec`` when its sandbox works; ``agents.<id>.disabled_tools`` are then hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from agent_core import (
    FILE_TOOLS,
    SKILL_TOOLS,
    AgentSettings,
    Approver,
    ExecProfile,
    MemoryIndex,
    PreToolUseHook,
    Tool,
    ToolRegistry,
    Verdict,
    add_self_evolution_tools,
    exec_hooks,
    memory_tools,
)
from agent_core.mcp import add_mcp_tools
from agent_core.orchestration import Orchestrator, TaskStore, add_mode_tools
from agent_core.tools import (
    EXEC,
    CronJobs,
    CronPolicy,
    FileSender,
    ToolContext,
    cron_tool,
    exec_tool,
    send_file_tool,
)
from bot.agents.exec_setup import ExecRuntime
from bot.agents.web_tools import WebTools
from bot.config import Config


class RouterParts(Protocol):
    """What the tool wiring reads of :class:`bot.agents.router.AgentRouter` (a protocol, so
    this module does not import the router that imports it)."""

    config: Config
    tools: ToolRegistry
    hooks: list[PreToolUseHook]
    cron: CronJobs | None
    web: WebTools
    files: FileSender | None
    exec_runtime: ExecRuntime | None
    exec_approver: Approver | None
    orchestrator: Orchestrator | None
    task_store: TaskStore | None


def default_registry(memory_index: MemoryIndex | None = None) -> ToolRegistry:
    """The registry every agent gets a copy of: the file tools, ``memory_search``/``memory_get``
    with a memory index, and the skill tools (deferred)."""
    tools = ToolRegistry.of(FILE_TOOLS)
    if memory_index is not None:
        for tool in memory_tools(memory_index):  # its write_file also re-indexes memory
            tools.register(tool)
    for tool in SKILL_TOOLS:  # offered by the loop to runs with more skills than fit inline
        tools.defer(tool)
    return tools


class _LateApprover:
    """The router's approver at the time of the call: the chats that answer approvals exist
    only after the router (the gateway is built on it)."""

    def __init__(self, router: RouterParts) -> None:
        self._router = router

    async def ask(self, ctx: ToolContext, command: str, profile: ExecProfile) -> Verdict | None:
        approver = self._router.exec_approver
        if approver is None:
            return None
        return await approver.ask(ctx, command, profile)


def agent_tools(
    router: RouterParts,
    agent_id: str,
    settings: AgentSettings,
    custom: Sequence[Tool] = (),
    mcp_tools: Sequence[Tool] = (),
    disabled: Sequence[str] = (),
) -> tuple[AgentSettings, ToolRegistry, list[PreToolUseHook]]:
    """The agent's registry and PreToolUse hooks (the router's and exec's), and its settings
    (with exec's profile when ``exec`` is offered). ``custom``: the agent's own tools;
    ``disabled``: ``agents.<id>.disabled_tools``."""
    tools = router.tools.clone()
    for tool in custom:
        tools.register(tool)
    add_mcp_tools(tools, mcp_tools, router.config.agents.defaults.mcp_inline_max)
    add_orchestration_tools(router, settings, tools)
    add_self_evolution_tools(tools, settings)
    if router.cron is not None:
        cron = router.config.cron
        policy = CronPolicy(settings.timezone, cron.max_jobs_per_user, cron.min_interval)
        tools.register(cron_tool(router.cron, policy))
    for tool in router.web.tools:  # tools.web (bot/agents/web_tools.py)
        tools.register(tool)
    if router.files is not None:
        tools.register(send_file_tool(router.files))
    # agents.<id>.disabled_tools (e.g. an approved ToolFailureRule suggestion): a call to
    # one is refused with this reason; deferred (MCP) tools are dropped too.
    hooks = list(router.hooks)
    if EXEC not in disabled:
        settings, exec_checks = add_exec_tool(router, settings, tools)
        hooks += exec_checks
    for name in disabled:
        tools.deferred.pop(name, None)
        tools.hide(name, f"disabled for this agent (agents.{agent_id}.disabled_tools)")
    return settings, tools, hooks


def add_exec_tool(
    router: RouterParts, settings: AgentSettings, tools: ToolRegistry
) -> tuple[AgentSettings, list[PreToolUseHook]]:
    """``exec`` when its sandbox works: the settings with its profile (prompt sections 5 and
    14) and its approval hooks; unchanged settings and no hooks otherwise."""
    runtime = router.exec_runtime
    if runtime is None or not runtime.available:
        return settings, []
    profile = runtime.profile(settings.owner_ids, admins(router.config))
    tools.register(exec_tool(runtime.sandbox, runtime.credentials))
    checks = exec_hooks(profile, runtime.config.deny_patterns, _LateApprover(router))
    return replace(settings, exec=profile), checks


def admins(config: Config) -> list[str]:
    """``bot.admins`` and every ``channels.<name>.admins`` (as ``channel:id``)."""
    result = list(config.bot.admins)
    for name in ("telegram", "slack", "zalo"):
        for admin in getattr(config.channels, name).admins:
            result.append(admin if ":" in admin else f"{name}:{admin}")
    return result


def add_orchestration_tools(
    router: RouterParts, settings: AgentSettings, tools: ToolRegistry
) -> None:
    """The mode's tools; the others are hidden (a call to one is refused with the reason)."""
    if router.orchestrator is not None:
        add_mode_tools(tools, settings, router.orchestrator, router.task_store)
