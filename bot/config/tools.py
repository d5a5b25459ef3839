"""Tools from outside, in config.yaml: ``mcp.servers.<name>`` and ``skills.paths``.

A server is either a program spoken to over stdio (``command``, ``args``, ``env``, ``cwd``) or
an HTTP endpoint (``url``, ``headers``; streamable HTTP, or ``transport: sse`` for servers that
still use SSE). Header and env values usually carry secrets: write them as ``${VAR}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from agent_core.mcp import ServerSpec
from bot.config.base import Duration, StrictModel
from bot.config.web_tools import WebToolsConfig

# The name prefixes its tools as ``<server>__<tool>``: short enough to leave room for the
# tool's own name in the 64 characters providers allow, and without "__" (checked below).
ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")]
_STDIO_KEYS = ("args", "env", "cwd")


class McpServerConfig(StrictModel):
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    transport: Literal["streamable_http", "sse"] | None = None
    """HTTP servers only; default ``streamable_http``."""
    enabled: bool = True
    timeout: Duration = Field(60.0, gt=0)
    """Seconds one tool call may take; then the model gets a timeout error for that call."""
    startup_timeout: Duration = Field(30.0, gt=0)
    tools: list[str] | None = None
    """Allow-list of the server's tool names (its own names, without the prefix)."""
    exclude_tools: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (a stdio server) or url (an HTTP server)")
        if self.url is not None:
            stdio = [key for key in _STDIO_KEYS if key in self.model_fields_set]
            if stdio:
                raise ValueError(f"{', '.join(stdio)}: only for stdio servers (with command)")
        elif self.headers or self.transport:
            raise ValueError("headers and transport are only for HTTP servers (with url)")
        return self

    def spec(self, name: str) -> ServerSpec:
        transport = "stdio" if self.command is not None else self.transport or "streamable_http"
        return ServerSpec(
            name=name,
            command=self.command,
            args=tuple(self.args),
            env=dict(self.env),
            cwd=self.cwd,
            url=self.url,
            headers=dict(self.headers),
            transport=transport,
            enabled=self.enabled,
            timeout=self.timeout,
            tools=tuple(self.tools) if self.tools is not None else None,
            exclude_tools=tuple(self.exclude_tools),
            startup_timeout=self.startup_timeout,
        )


class McpConfig(StrictModel):
    servers: dict[ServerName, McpServerConfig] = Field(default_factory=dict)
    startup: Literal["eager", "lazy"] = "eager"
    """``eager``: servers start with the service; ``lazy``: when an agent first needs them."""

    @field_validator("servers")
    @classmethod
    def _no_separator(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if "__" in name:
                raise ValueError(f"server name {name!r}: '__' separates server and tool names")
        return servers

    def specs(self) -> list[ServerSpec]:
        return [server.spec(name) for name, server in self.servers.items()]

    @property
    def enabled(self) -> list[str]:
        return [name for name, server in self.servers.items() if server.enabled]

    def secrets(self) -> list[str]:
        """Header and env values, masked in logs like every other secret."""
        return [
            value
            for server in self.servers.values()
            for value in (*server.headers.values(), *server.env.values())
            if len(value) >= 8  # short values (flags, ports) would mask ordinary words
        ]


class SkillsConfig(StrictModel):
    paths: list[Path] = Field(default_factory=list)
    """Folders of skills shared by every agent (besides each workspace's ``skills/``)."""


class ToolsConfig(StrictModel):
    """``tools``: settings of built-in tools."""

    web: WebToolsConfig = Field(default_factory=WebToolsConfig)
    """``web_fetch`` and ``web_search`` (bot/config/web_tools.py, docs/web.md)."""
