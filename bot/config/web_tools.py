"""``tools.web``: the ``web_fetch`` and ``web_search`` tools, their limits and the SSRF guard's
openings (docs/web.md).

``allow_hosts`` opens named destinations that the guard closes otherwise (private addresses,
ports other than 80/443): host names, IP addresses or CIDRs. ``search.provider`` picks the search
API; unset, it is the one provider whose key (SearXNG: ``base_url``) is set, or ``none``: then
``web_search`` is not offered.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ByteSize, Field, field_validator, model_validator

from agent_core.tools import BRAVE_BASE_URL, TAVILY_BASE_URL, AllowList
from bot.config.base import Duration, StrictModel

SearchProviderName = Literal["none", "brave", "tavily", "searxng"]


class SearchApiConfig(StrictModel):
    api_key: str = ""
    base_url: str = Field("", pattern=r"^(https?://.+)?$")
    """Empty: the provider's public API (SearXNG has none: its ``base_url`` is required)."""


class WebSearchConfig(StrictModel):
    provider: SearchProviderName | None = None
    """``brave``, ``tavily``, ``searxng`` or ``none`` (no ``web_search`` tool). Unset: the
    provider configured below, if exactly one is; else ``none``."""
    count: int = Field(5, ge=1, le=20)
    """Results per search when the model does not ask for a number."""
    brave: SearchApiConfig = Field(default_factory=SearchApiConfig)
    tavily: SearchApiConfig = Field(default_factory=SearchApiConfig)
    searxng: SearchApiConfig = Field(default_factory=SearchApiConfig)

    @model_validator(mode="after")
    def _provider_ready(self) -> WebSearchConfig:
        if self.provider is None:
            configured = [name for name in ("brave", "tavily", "searxng") if self._ready(name)]
            if len(configured) > 1:
                raise ValueError(
                    f"provider: {', '.join(configured)} are all configured: name the one to use"
                )
            return self
        if self.provider in ("brave", "tavily") and not self.api(self.provider).api_key:
            raise ValueError(f"{self.provider}.api_key: required with provider {self.provider}")
        if self.provider == "searxng" and not self.searxng.base_url:
            raise ValueError("searxng.base_url: required with provider searxng (your instance)")
        return self

    def api(self, name: str) -> SearchApiConfig:
        api: SearchApiConfig = getattr(self, name)
        return api

    def _ready(self, name: str) -> bool:
        return bool(self.searxng.base_url if name == "searxng" else self.api(name).api_key)

    @property
    def active(self) -> str:
        """The provider in use, ``none`` for no search tool."""
        if self.provider is not None:
            return self.provider
        ready = [name for name in ("brave", "tavily", "searxng") if self._ready(name)]
        return ready[0] if ready else "none"

    def base_url(self) -> str:
        name = self.active
        given = self.api(name).base_url if name != "none" else ""
        return given or {"brave": BRAVE_BASE_URL, "tavily": TAVILY_BASE_URL}.get(name, "")

    def secrets(self) -> list[str]:
        return [api.api_key for api in (self.brave, self.tavily, self.searxng) if api.api_key]


class WebToolsConfig(StrictModel):
    fetch: bool = True
    """Offer ``web_fetch`` (per agent, ``agents.<id>.disabled_tools`` takes it away)."""
    max_bytes: ByteSize = Field(ByteSize(2 << 20), gt=0)
    """Largest body downloaded (after decompression); a longer one is cut there."""
    timeout: Duration = Field(15.0, gt=0)
    """Seconds one fetch or search may take, redirects and DNS included."""
    max_chars: int = Field(20_000, ge=100)
    """Characters of text a fetch returns at most; the model is told when a page was cut."""
    max_fetches_per_run: int = Field(10, ge=1)
    """``web_fetch`` calls one user's run may make."""
    max_redirects: int = Field(5, ge=0, le=20)
    allow_hosts: list[str] = Field(default_factory=list)
    """Host names, IP addresses or CIDRs the SSRF guard opens, on any port (a SearXNG on the
    LAN, an intranet wiki). Everything else that is not globally routable stays closed."""
    search: WebSearchConfig = Field(default_factory=WebSearchConfig)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        for i, entry in enumerate(hosts):
            try:
                AllowList.parse([entry])
            except ValueError as exc:
                raise ValueError(f"entry {i}: {exc}") from exc
        return hosts

    def allow_list(self) -> AllowList:
        return AllowList.parse(self.allow_hosts)
