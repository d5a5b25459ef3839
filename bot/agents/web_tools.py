"""``tools.web`` → the ``web_fetch`` and ``web_search`` tools every agent gets (docs/web.md).

One guarded HTTP client and one per-run fetch counter serve every agent of the process, so
``max_fetches_per_run`` holds whichever agent's loop the run is in. ``tools.web.fetch: false``
leaves ``web_fetch`` out, a search provider of ``none`` leaves ``web_search`` out; per agent,
``agents.<id>.disabled_tools`` still hides either (applied after, in the router).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.tools import (
    FetchCounter,
    FetchPolicy,
    Resolver,
    Tool,
    WebClient,
    WebGuard,
    WebLimits,
    search_provider,
    web_fetch_tool,
    web_search_tool,
)
from bot.config.web_tools import WebToolsConfig


@dataclass
class WebTools:
    tools: list[Tool] = field(default_factory=list)
    client: WebClient | None = None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def build_web_tools(config: WebToolsConfig, *, resolver: Resolver | None = None) -> WebTools:
    """The tools ``config`` switches on; ``resolver``: host → addresses (tests)."""
    provider = config.search.active
    if not config.fetch and provider == "none":
        return WebTools()
    limits = WebLimits(int(config.max_bytes), config.timeout, config.max_redirects)
    client = WebClient(WebGuard(config.allow_list(), resolver=resolver), limits)
    tools: list[Tool] = []
    if config.fetch:
        policy = FetchPolicy(config.max_chars, config.max_fetches_per_run)
        tools.append(web_fetch_tool(client, policy, counter=FetchCounter()))
    if provider != "none":
        api = config.search.api(provider)
        searcher = search_provider(provider, client, config.search.base_url(), api.api_key)
        tools.append(web_search_tool(searcher, default_count=config.search.count))
    return WebTools(tools, client)
