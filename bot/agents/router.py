"""The agent router: agent ids → loop instances, resolved lazily and cached with a TTL.

Resolving an agent (agent-loop spec, sections 9 and 10) means: find its definition, apply
``agents.defaults``, look up its provider and optional fallback provider, give it its own copy
of the tool registry plus its custom tools (:mod:`bot.agents.tools`), and build the
:class:`~agent_core.Loop`. The loop is cached for ``agents.cache_ttl`` seconds;
:meth:`AgentRouter.invalidate` drops it at once (any change to an agent's definition or tools
does that), so the next message re-resolves it.

Where a definition comes from: a stored agent (``agents`` table, ``loopgate agents set``) is
merged over the ``config.yaml`` entry of the same id field by field, every field the database sets
winning; so ``loopgate agents set main --model X`` changes only the model of a configured agent,
and ``loopgate agents delete main`` brings back the config.yaml definition. A runtime definition
from :meth:`AgentRouter.define` (this process only, not stored) replaces both as a whole.
Changes made through :meth:`AgentRouter.save` / :meth:`AgentRouter.remove` apply at once; changes
made by another process (``loopgate agents`` on a running server's database) are seen when the
cached loop expires, i.e. within ``agents.cache_ttl`` seconds.

A cached loop keeps serving the runs already started on it; only new runs see the new one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from agent_core import (
    AgentSettings,
    Approver,
    EventBus,
    Loop,
    MemoryIndex,
    PreToolUseHook,
    SessionStore,
    SharedLocks,
    Tool,
    ToolRegistry,
    TraceStore,
    UsageMeter,
)
from agent_core.mcp import McpManager
from agent_core.orchestration import (
    OrchestrationProfile,
    OrchestrationStore,
    Orchestrator,
    TaskStore,
    resolve_profile,
)
from agent_core.providers import OfflineProvider, OpenAICompatProvider, Provider
from agent_core.tools import (
    CronJobs,
    FileSender,
    Resolver,
)
from bot.agents.exec_setup import ExecRuntime
from bot.agents.settings import agent_settings
from bot.agents.tools import add_exec_tool, add_orchestration_tools, agent_tools, default_registry
from bot.agents.web_tools import build_web_tools
from bot.config import OPENAI_BASE_URL, AgentConfig, Config, ProviderConfig
from bot.errors import BotError

log = structlog.get_logger(__name__)


class UnknownAgent(BotError, LookupError):
    """The message names an agent that is neither configured, stored nor defined at runtime."""

    def __init__(self, agent_id: str, known: list[str], stored: Sequence[str] = ()) -> None:
        super().__init__(
            f"unknown agent {agent_id!r} (configured: {', '.join(known)}; stored: "
            f"{', '.join(stored) or 'none'}); add it under agents.list in config.yaml or with "
            "`loopgate agents set ID`"
        )
        self.agent_id = agent_id
        self.known = list(known)
        self.stored = list(stored)


class StoredAgentLike(Protocol):
    @property
    def agent(self) -> AgentConfig: ...


class AgentStore(Protocol):
    """Where agents defined at run time live (:class:`bot.storage._agents.SqlAgentStore`)."""

    async def get(self, agent_id: str) -> StoredAgentLike | None: ...

    async def list(self) -> Sequence[StoredAgentLike]: ...

    async def upsert(self, agent: AgentConfig) -> None: ...

    async def delete(self, agent_id: str) -> bool: ...


def merge_agent(base: AgentConfig | None, override: AgentConfig | None) -> AgentConfig | None:
    """``base`` with every field ``override`` sets (not None) replaced."""
    if base is None or override is None:
        return override or base
    changes = {
        name: value
        for name in override.model_fields_set
        if name != "id" and (value := getattr(override, name)) is not None
    }
    return base.model_copy(update=changes)


def build_provider(name: str, config: ProviderConfig) -> Provider:
    """The configured provider, or the honest offline one when no model can be reached.

    OpenAI's own endpoint needs a key; any other base_url (Ollama, vLLM, a proxy) may not.
    """
    if config.kind == "anthropic":
        from agent_core.providers import AnthropicProvider  # only when configured

        return AnthropicProvider(
            config.base_url,
            config.api_key,
            name=name,
            timeout=config.timeout,
            max_tokens=config.max_tokens or 4096,
            thinking_budget=config.thinking_budget,
        )
    if config.base_url.rstrip("/") == OPENAI_BASE_URL and not config.api_key:
        log.warning("provider.offline", provider=name, reason="no api_key for api.openai.com")
        return OfflineProvider()
    return OpenAICompatProvider(config.base_url, config.api_key, name=name, timeout=config.timeout)


@dataclass(frozen=True, slots=True)
class _Cached:
    loop: Loop
    expires_at: float


class AgentRouter:
    def __init__(
        self,
        config: Config,
        *,
        store: SessionStore,
        traces: TraceStore,
        events: EventBus,
        tools: ToolRegistry | None = None,
        providers: dict[str, Provider] | None = None,
        agent_tools: Mapping[str, Sequence[Tool]] | None = None,
        hooks: Sequence[PreToolUseHook] = (),
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        agent_store: AgentStore | None = None,
        memory_index: MemoryIndex | None = None,
        orchestration: OrchestrationStore | None = None,
        tasks: TaskStore | None = None,
        mcp: McpManager | None = None,
        locks: SharedLocks | None = None,
        cron: CronJobs | None = None,
        exec_runtime: ExecRuntime | None = None,
        meter: UsageMeter | None = None,
        web_resolver: Resolver | None = None,
        files: FileSender | None = None,
    ) -> None:
        """``providers`` replaces configured providers by name; ``agent_tools`` adds custom
        tools per agent id; ``hooks`` are the PreToolUse hooks of every agent; ``agent_store``
        holds agents defined in the database (then use :meth:`resolve`, not :meth:`get`);
        ``memory_index`` adds ``memory_search``/``memory_get`` to the default tools;
        ``orchestration`` (links and teams) resolves each agent's mode and ``tasks`` backs
        ``team_tasks``. The orchestration tools are offered once :attr:`orchestrator` is set.
        ``mcp`` gives each agent the tools of its MCP servers (``agents.<id>.mcp_servers``).
        ``locks``: the compaction and seeding locks shared with other processes (bot/cluster).
        ``cron``: where the ``cron`` tool keeps jobs (bot/scheduling); None: no such tool.
        ``exec_runtime``: the probed sandbox of ``tools.exec`` (``exec`` is offered when it is
        available); its approvals go through :attr:`exec_approver`, set once the chats exist.
        ``meter``: prices each model call and checks usage limits (bot/usage).
        ``web_resolver``: host → addresses for the web tools' SSRF guard (tests).
        ``files``: how the ``send_file`` tool reaches the run's chat (bot/pipeline); None: no
        such tool. Set :attr:`files` later (before the first resolve) when it needs the gateway."""
        self.config = config
        self.store = store
        self.traces = traces
        self.events = events
        self.tools = tools if tools is not None else default_registry(memory_index)
        self.hooks = list(hooks)
        self.ttl = config.agents.cache_ttl if ttl is None else ttl
        self._clock = clock
        self._providers: dict[str, Provider] = dict(providers or {})
        self._agent_tools: dict[str, list[Tool]] = {
            k: list(v) for k, v in (agent_tools or {}).items()
        }
        self._defined: dict[str, AgentConfig] = {}
        self.agent_store = agent_store
        self.orchestration = orchestration
        self.task_store = tasks
        self.mcp = mcp
        self.locks = locks
        self.cron = cron
        self.exec_runtime = exec_runtime
        self.exec_approver: Approver | None = None
        self.meter = meter
        self.web = build_web_tools(config.tools.web, resolver=web_resolver)
        self.files = files
        self.orchestrator: Orchestrator | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._cache: dict[str, _Cached] = {}
        self._retired: list[Loop] = []  # replaced loops that may still have runs in flight
        self.resolutions = 0  # how many times a loop was built (for tests and metrics)

    @property
    def agent_ids(self) -> list[str]:
        ids = [agent.id for agent in self.config.agents.list]
        ids += [i for i in self._defined if i not in ids]
        return ids if "main" in ids else ["main", *ids]

    # -- definitions ---------------------------------------------------------------------------

    def define(self, agent: AgentConfig) -> None:
        """Add or replace an agent in this process only (not stored): it replaces the config.yaml
        and database definitions of that id as a whole. The cached loop is dropped."""
        self._check_providers(agent)
        self._defined[agent.id] = agent
        self.invalidate(agent.id)

    def _check_providers(self, agent: AgentConfig) -> None:
        providers = self.config.providers.all()
        for name in (agent.provider, agent.fallback_provider):
            if name and name not in providers:
                raise ValueError(
                    f"agent {agent.id!r}: unknown provider {name!r} "
                    f"(defined: {', '.join(sorted(providers))})"
                )

    async def save(self, agent: AgentConfig) -> None:
        """Store the agent in the database (replacing a stored one); the cached loop is dropped."""
        if self.agent_store is None:
            raise RuntimeError("this router has no agent store")
        self._check_providers(agent)
        await self.agent_store.upsert(agent)
        self.invalidate(agent.id)

    async def remove(self, agent_id: str) -> bool:
        """Delete the stored agent (False if none); the cached loop is dropped either way."""
        if self.agent_store is None:
            raise RuntimeError("this router has no agent store")
        removed = await self.agent_store.delete(agent_id)
        self.invalidate(agent_id)
        return removed

    async def stored_ids(self) -> list[str]:
        if self.agent_store is None:
            return []
        return [stored.agent.id for stored in await self.agent_store.list()]

    def add_tool(self, agent_id: str, tool: Tool) -> None:
        """Give one agent a custom tool (other agents never see it)."""
        self._agent_tools.setdefault(agent_id, []).append(tool)
        self.invalidate(agent_id)

    def invalidate(self, agent_id: str | None = None) -> None:
        """Forget the cached loop of one agent (or of all): the next use re-resolves it."""
        ids = list(self._cache) if agent_id is None else [agent_id]
        for i in ids:
            cached = self._cache.pop(i, None)
            if cached is not None:
                self._retire(cached.loop)
                log.info("agent.invalidated", agent_id=i)

    # -- resolution ----------------------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = build_provider(name, self.config.providers.all()[name])
        return self._providers[name]

    def _definition(self, agent_id: str, stored: AgentConfig | None) -> AgentConfig | None:
        if agent_id in self._defined:
            return self._defined[agent_id]
        configured = next((a for a in self.config.agents.list if a.id == agent_id), None)
        return merge_agent(configured, stored)

    def settings(
        self,
        agent_id: str,
        stored: AgentConfig | None = None,
        profile: OrchestrationProfile | None = None,
    ) -> AgentSettings:
        """Resolved settings; ``stored`` is the agent's database row, merged over config.yaml;
        ``profile`` its orchestration mode (default: spawn)."""
        if agent_id not in self.agent_ids and stored is None:
            raise UnknownAgent(agent_id, self.agent_ids)
        return agent_settings(self.config, agent_id, self._definition(agent_id, stored), profile)

    def get(self, agent_id: str) -> Loop:
        """The agent's loop from config.yaml and :meth:`define` only (no database); raises
        :class:`UnknownAgent` for an id nobody defined. With an agent store, use :meth:`resolve`."""
        now = self._clock()
        cached = self._cache.get(agent_id)
        if cached is not None and now < cached.expires_at:
            return cached.loop
        if self.agent_store is not None:
            raise RuntimeError("the router has an agent store: use `await router.resolve(id)`")
        if cached is not None:
            self._retire(cached.loop)
        loop = self._resolve(agent_id)
        self._cache[agent_id] = _Cached(loop, now + self.ttl)
        return loop

    async def resolve(self, agent_id: str) -> Loop:
        """The agent's loop: cached, else built from config.yaml, the database and
        :meth:`define`. Raises :class:`UnknownAgent` (naming the configured and stored agents)
        for an id none of them defines.

        When the database fails and an expired loop of the agent is cached, that loop keeps
        serving (``agent.store_unavailable`` is logged) until the database answers again.
        """
        cached = self._cache.get(agent_id)
        if cached is not None and self._clock() < cached.expires_at:
            return cached.loop
        async with self._locks.setdefault(agent_id, asyncio.Lock()):
            now = self._clock()
            cached = self._cache.get(agent_id)
            if cached is not None and now < cached.expires_at:
                return cached.loop  # resolved by a concurrent caller while we waited
            stored: AgentConfig | None = None
            if self.agent_store is not None:
                try:
                    row = await self.agent_store.get(agent_id)
                except Exception as exc:
                    if cached is None:
                        raise
                    log.warning("agent.store_unavailable", agent_id=agent_id, error=str(exc))
                    return cached.loop
                stored = row.agent if row is not None else None
            if agent_id not in self.agent_ids and stored is None:
                if cached is not None:  # deleted from the database since it was cached
                    self._retire(self._cache.pop(agent_id).loop)
                raise UnknownAgent(agent_id, self.agent_ids, await self.stored_ids())
            profile = await self._profile(agent_id)
            mcp_tools = await self._mcp_tools(self._definition(agent_id, stored))
            loop = self._resolve(agent_id, stored, profile, mcp_tools)
            if cached is not None:
                self._retire(cached.loop)
            self._cache[agent_id] = _Cached(loop, now + self.ttl)
            return loop

    async def _profile(self, agent_id: str) -> OrchestrationProfile:
        """The agent's mode from its team and links (Team > Delegate > Spawn)."""
        if self.orchestration is None:
            return OrchestrationProfile()
        team = await self.orchestration.team_of(agent_id)
        links = await self.orchestration.links_of(agent_id)
        return resolve_profile(agent_id, team, links)

    async def _mcp_tools(self, agent: AgentConfig | None) -> list[Tool]:
        """The tools of the agent's MCP servers (default: every enabled one), started on first
        use when ``mcp.startup`` is lazy."""
        if self.mcp is None:
            return []
        return await self.mcp.tools(agent.mcp_servers if agent else None)

    def _resolve(
        self,
        agent_id: str,
        stored: AgentConfig | None = None,
        profile: OrchestrationProfile | None = None,
        mcp_tools: Sequence[Tool] = (),
    ) -> Loop:
        settings = self.settings(agent_id, stored, profile)
        custom = self._agent_tools.get(agent_id, ())
        disabled = self.disabled_tools(agent_id, stored)
        settings, tools, hooks = agent_tools(self, agent_id, settings, custom, mcp_tools, disabled)
        fallback = self.provider(settings.fallback_provider) if settings.fallback_provider else None
        self.resolutions += 1
        log.debug("agent.resolved", agent_id=agent_id, provider=settings.provider)
        return Loop(
            settings,
            self.provider(settings.provider),
            tools,
            self.store,
            self.traces,
            self.events,
            fallback=fallback,
            hooks=hooks,
            locks=self.locks,
            meter=self.meter,
        )

    def disabled_tools(self, agent_id: str, stored: AgentConfig | None = None) -> tuple[str, ...]:
        """``agents.<id>.disabled_tools`` (merged with the stored definition)."""
        definition = self._definition(agent_id, stored)
        return tuple((definition and definition.disabled_tools) or ())

    def add_exec_tool(
        self, settings: AgentSettings, tools: ToolRegistry
    ) -> tuple[AgentSettings, list[PreToolUseHook]]:
        """See :func:`bot.agents.tools.add_exec_tool`."""
        return add_exec_tool(self, settings, tools)

    def add_orchestration_tools(self, settings: AgentSettings, tools: ToolRegistry) -> None:
        """See :func:`bot.agents.tools.add_orchestration_tools`."""
        add_orchestration_tools(self, settings, tools)

    def _retire(self, loop: Loop) -> None:
        # Kept while runs or post-run compactions are in flight, so aclose can cancel them.
        self._retired = [old for old in self._retired if old.busy]
        if loop.busy:
            self._retired.append(loop)

    # -- observability -------------------------------------------------------------------------

    def active_runs(self) -> dict[str, int]:
        """Runs in progress per agent id, counting loops replaced while their runs go on."""
        counts: dict[str, int] = {}
        for loop in [*(c.loop for c in self._cache.values()), *self._retired]:
            if loop.active_runs:
                counts[loop.settings.id] = counts.get(loop.settings.id, 0) + loop.active_runs
        return counts

    async def aclose(self) -> None:
        # Background compactions first: they use the providers and the database.
        for loop in [*(c.loop for c in self._cache.values()), *self._retired]:
            await loop.aclose()
        for provider in self._providers.values():
            await provider.aclose()
        await self.web.aclose()
