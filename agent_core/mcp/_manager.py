"""``McpManager``: the configured MCP servers, their tools, their health, their shutdown.

Eager (the default): ``start`` starts every enabled server at once and waits, each at most its
``startup_timeout``, until it is ready or failed. Lazy: a server starts the first time an agent
asks for its tools. Either way a server that fails is never fatal: it offers no tools, its
status says why, and it keeps being retried in the background.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import structlog

from agent_core.mcp._servers import ServerSpec, ServerState, ServerStatus
from agent_core.tools.base import Tool

if TYPE_CHECKING:
    from agent_core.mcp._connection import ServerConnection

log = structlog.get_logger(__name__)

ChangeCallback = Callable[[str], None]


class McpManager:
    def __init__(
        self,
        specs: Sequence[ServerSpec],
        *,
        lazy: bool = False,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        health_interval: float = 15.0,
    ) -> None:
        names = [spec.name for spec in specs]
        if duplicates := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"MCP server names must be unique: {', '.join(duplicates)}")
        self.lazy = lazy
        self._callbacks: list[ChangeCallback] = []
        self._closed = False
        self._servers: dict[str, ServerConnection] = {}
        if not specs:
            return
        # The SDK costs ~1 s of imports and tens of MiB: only services with servers pay for it.
        from agent_core.mcp._connection import ServerConnection

        self._servers = {
            spec.name: ServerConnection(
                spec,
                backoff_base=backoff_base,
                backoff_cap=backoff_cap,
                health_interval=health_interval,
                changed=self._changed,
            )
            for spec in specs
        }

    async def start(self) -> None:
        """Eager mode: start every enabled server and wait until each is ready or failed.
        Never raises for a server's failure. Lazy mode: nothing (``tools`` starts them)."""
        if not self.lazy:
            await self._start([s for s in self._servers.values() if s.spec.enabled])

    async def tools(self, servers: Collection[str] | None = None) -> list[Tool]:
        """The tools of these servers (None: every enabled one), starting those not started."""
        if self._closed:
            return []
        if servers is None:
            chosen = list(self._servers.values())
        else:
            unknown = sorted(set(servers) - set(self._servers))
            if unknown:
                log.warning("mcp.unknown_servers", names=unknown)
            chosen = [self._servers[name] for name in servers if name in self._servers]
        enabled = [server for server in chosen if server.spec.enabled]
        # Servers another caller is starting are waited for too.
        await self._start(
            [s for s in enabled if s.state in (ServerState.STOPPED, ServerState.STARTING)]
        )
        return [tool for server in enabled for tool in server.tools]

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name=name,
                state=server.state,
                transport=server.spec.kind,
                tools=tuple(tool.name for tool in server.tools),
                error=server.error,
                restarts=server.restarts,
            )
            for name, server in self._servers.items()
        ]

    @property
    def degraded(self) -> bool:
        """Some enabled server that was started is failed or restarting."""
        bad = (ServerState.FAILED, ServerState.RESTARTING)
        return any(server.started and server.state in bad for server in self._servers.values())

    def on_change(self, callback: ChangeCallback) -> None:
        """``callback(server)`` runs whenever the tools that server offers change: its tools
        appeared (started, restarted), went away (failed, crashed) or were re-listed."""
        self._callbacks.append(callback)

    async def aclose(self) -> None:
        """Stop every server (stdio programs are terminated) and its supervisor. Idempotent."""
        self._closed = True
        await asyncio.gather(*(server.aclose() for server in self._servers.values()))

    async def _start(self, servers: list[ServerConnection]) -> None:
        if self._closed:
            return
        for server in servers:
            server.start()
        results = await asyncio.gather(
            *(server.wait_settled() for server in servers), return_exceptions=True
        )
        for server, result in zip(servers, results, strict=True):
            if isinstance(result, TimeoutError):
                log.warning("mcp.start_slow", name=server.spec.name, state=server.state.value)
            elif isinstance(result, BaseException):
                raise result

    def _changed(self, name: str) -> None:
        for callback in list(self._callbacks):
            try:
                callback(name)
            except Exception:
                log.exception("mcp.on_change_failed", name=name)
