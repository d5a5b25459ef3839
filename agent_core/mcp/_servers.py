"""An MCP server: what it is (``ServerSpec``) and how it is doing (``ServerStatus``)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TransportName = Literal["stdio", "streamable_http", "sse"]
# "auto" probes the 2026 protocol first (the SDK's default); "legacy" goes straight to the
# initialize handshake, for servers that mishandle the probe.
ProtocolMode = Literal["auto", "legacy"]

_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str  # the config key; prefixes the server's tools as "<name>__<tool>"
    command: str | None = None  # stdio
    args: tuple[str, ...] = ()
    # Merged over the SDK's default safe environment (PATH, HOME...), not over ours: the
    # service's own secrets must not leak into a third-party program.
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None  # HTTP
    headers: Mapping[str, str] = field(default_factory=dict)
    # Derived when not given: command → "stdio", url → "streamable_http".
    transport: TransportName | None = None
    enabled: bool = True
    timeout: float = 60.0  # per tool call, seconds
    tools: tuple[str, ...] | None = None  # allow-list of the server's own tool names; None = all
    exclude_tools: tuple[str, ...] = ()
    startup_timeout: float = 30.0
    protocol: ProtocolMode = "auto"

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"MCP server name {self.name!r}: only letters, digits, '_' and '-'")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: set either command (stdio) or url (HTTP)")
        derived: TransportName = "stdio" if self.command is not None else "streamable_http"
        transport = self.transport or derived
        if (transport == "stdio") != (self.command is not None):
            raise ValueError(f"MCP server {self.name!r}: transport {transport!r} does not fit")
        if self.timeout <= 0 or self.startup_timeout <= 0:
            raise ValueError(f"MCP server {self.name!r}: timeouts must be positive")
        object.__setattr__(self, "transport", transport)

    @property
    def kind(self) -> TransportName:
        """The transport, never None (``__post_init__`` derived it)."""
        return self.transport or ("stdio" if self.command is not None else "streamable_http")


class ServerState(enum.StrEnum):
    DISABLED = "disabled"  # enabled: false; never started
    STOPPED = "stopped"  # lazy mode: not started yet (or shut down)
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # could not start; retried in the background with backoff
    RESTARTING = "restarting"  # the connection was lost; being restarted


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    state: ServerState
    transport: str
    tools: tuple[str, ...]  # the namespaced names offered
    error: str | None
    restarts: int  # start attempts after the first one (after a failure or a crash)
