"""Resolving agent ids into loop instances, built from config.yaml on first use."""

from __future__ import annotations

import structlog

from agent_core import FILE_TOOLS, AgentSettings, EventBus, Loop, ToolRegistry
from agent_core.providers import OfflineProvider, Provider
from agent_core.providers.openai_compat import OpenAICompatProvider
from agent_core.store import SessionStore, TraceStore
from bot.config import OPENAI_BASE_URL, Config, ProviderConfig

log = structlog.get_logger(__name__)


class UnknownAgent(LookupError):
    def __init__(self, agent_id: str, known: list[str]) -> None:
        super().__init__(f"unknown agent {agent_id!r} (configured: {', '.join(known)})")
        self.agent_id = agent_id


def build_provider(name: str, config: ProviderConfig) -> Provider:
    """The configured provider, or the honest offline one when no model can be reached.

    OpenAI's own endpoint needs a key; any other base_url (Ollama, vLLM, a proxy) may not.
    """
    if config.base_url.rstrip("/") == OPENAI_BASE_URL and not config.api_key:
        log.warning("provider.offline", provider=name, reason="no api_key for api.openai.com")
        return OfflineProvider()
    return OpenAICompatProvider(config.base_url, config.api_key, name=name, timeout=config.timeout)


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
    ) -> None:
        self.config = config
        self.store = store
        self.traces = traces
        self.events = events
        self.tools = tools if tools is not None else ToolRegistry.of(FILE_TOOLS)
        self._providers: dict[str, Provider] = dict(providers or {})
        self._loops: dict[str, Loop] = {}

    @property
    def agent_ids(self) -> list[str]:
        ids = [agent.id for agent in self.config.agents.list]
        return ids if "main" in ids else ["main", *ids]

    def provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = build_provider(name, self.config.providers.all()[name])
        return self._providers[name]

    def settings(self, agent_id: str) -> AgentSettings:
        if agent_id not in self.agent_ids:
            raise UnknownAgent(agent_id, self.agent_ids)
        defaults = self.config.agents.defaults
        agent = next((a for a in self.config.agents.list if a.id == agent_id), None)
        provider_name = (agent and agent.provider) or self.config.providers.default
        provider_config = self.config.providers.all()[provider_name]
        return AgentSettings(
            id=agent_id,
            provider=provider_name,
            model=(agent and agent.model) or provider_config.model,
            workspace=(agent and agent.workspace) or defaults.workspace,
            max_iterations=(agent and agent.max_iterations) or defaults.max_iterations,
            context_window=(agent and agent.context_window) or defaults.context_window,
            max_message_chars=defaults.max_message_chars,
            history_limit=defaults.history_limit,
            system_prompt=(agent and agent.system_prompt) or defaults.system_prompt,
            stream=defaults.stream,
        )

    def get(self, agent_id: str) -> Loop:
        loop = self._loops.get(agent_id)
        if loop is None:
            settings = self.settings(agent_id)
            loop = Loop(
                settings,
                self.provider(settings.provider),
                self.tools.clone(),
                self.store,
                self.traces,
                self.events,
            )
            self._loops[agent_id] = loop
        return loop

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
