"""The agent router: agent ids → loop instances, resolved lazily and cached with a TTL.

Resolving an agent (agent-loop spec, sections 9 and 10) means: find its definition (runtime
definitions from :meth:`AgentRouter.define` win over ``config.yaml``), apply
``agents.defaults``, look up its provider and optional fallback provider, give it its own copy
of the tool registry plus its custom tools, and build the :class:`~agent_core.Loop`. The loop is
cached for ``agents.cache_ttl`` seconds; :meth:`AgentRouter.invalidate` drops it at once (any
change to an agent's definition or tools does that), so the next message re-resolves it.

A cached loop keeps serving the runs already started on it; only new runs see the new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from agent_core import FILE_TOOLS, AgentSettings, EventBus, Loop, Tool, ToolRegistry
from agent_core.hooks import PreToolUseHook
from agent_core.providers import AnthropicProvider, OfflineProvider, Provider
from agent_core.providers.openai_compat import OpenAICompatProvider
from agent_core.store import SessionStore, TraceStore
from bot.config import OPENAI_BASE_URL, AgentConfig, Config, ProviderConfig

log = structlog.get_logger(__name__)


class UnknownAgent(LookupError):
    """The message names an agent that is neither configured nor defined at runtime."""

    def __init__(self, agent_id: str, known: list[str]) -> None:
        super().__init__(
            f"unknown agent {agent_id!r} (configured: {', '.join(known)}); add it under "
            "agents.list in config.yaml"
        )
        self.agent_id = agent_id


def build_provider(name: str, config: ProviderConfig) -> Provider:
    """The configured provider, or the honest offline one when no model can be reached.

    OpenAI's own endpoint needs a key; any other base_url (Ollama, vLLM, a proxy) may not.
    """
    if config.kind == "anthropic":
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
    ) -> None:
        """``providers`` replaces configured providers by name; ``agent_tools`` adds custom
        tools per agent id; ``hooks`` are the PreToolUse hooks of every agent."""
        self.config = config
        self.store = store
        self.traces = traces
        self.events = events
        self.tools = tools if tools is not None else ToolRegistry.of(FILE_TOOLS)
        self.hooks = list(hooks)
        self.ttl = config.agents.cache_ttl if ttl is None else ttl
        self._clock = clock
        self._providers: dict[str, Provider] = dict(providers or {})
        self._agent_tools: dict[str, list[Tool]] = {
            k: list(v) for k, v in (agent_tools or {}).items()
        }
        self._defined: dict[str, AgentConfig] = {}
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
        """Add or replace an agent at runtime; the cached loop is dropped."""
        providers = self.config.providers.all()
        for name in (agent.provider, agent.fallback_provider):
            if name and name not in providers:
                raise ValueError(f"agent {agent.id!r}: unknown provider {name!r}")
        self._defined[agent.id] = agent
        self.invalidate(agent.id)

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

    def _definition(self, agent_id: str) -> AgentConfig | None:
        if agent_id in self._defined:
            return self._defined[agent_id]
        return next((a for a in self.config.agents.list if a.id == agent_id), None)

    def settings(self, agent_id: str) -> AgentSettings:
        if agent_id not in self.agent_ids:
            raise UnknownAgent(agent_id, self.agent_ids)
        defaults = self.config.agents.defaults
        agent = self._definition(agent_id)
        providers = self.config.providers.all()
        provider_name = (agent and agent.provider) or self.config.providers.default
        fallback_name = agent.fallback_provider if agent else None
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
            history_limit=defaults.history_limit,
            system_prompt=(agent and agent.system_prompt) or defaults.system_prompt,
            max_tokens=providers[provider_name].max_tokens,
            stream=defaults.stream,
            max_tool_calls=(agent and agent.max_tool_calls) or defaults.max_tool_calls,
            max_parallel_tools=defaults.max_parallel_tools,
            fallback_provider=fallback_name,
            fallback_model=fallback_model,
        )

    def get(self, agent_id: str) -> Loop:
        """The agent's loop; raises :class:`UnknownAgent` for an id nobody defined."""
        now = self._clock()
        cached = self._cache.get(agent_id)
        if cached is not None and now < cached.expires_at:
            return cached.loop
        if cached is not None:
            self._retire(cached.loop)
        loop = self._resolve(agent_id)
        self._cache[agent_id] = _Cached(loop, now + self.ttl)
        return loop

    def _resolve(self, agent_id: str) -> Loop:
        settings = self.settings(agent_id)
        tools = self.tools.clone()
        for tool in self._agent_tools.get(agent_id, ()):
            tools.register(tool)
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
            hooks=self.hooks,
        )

    def _retire(self, loop: Loop) -> None:
        self._retired = [old for old in self._retired if old.active_runs > 0]
        if loop.active_runs > 0:
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
        for provider in self._providers.values():
            await provider.aclose()
