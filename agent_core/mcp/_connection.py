"""One MCP server's connection, owned by one supervisor task.

The SDK's client lives in anyio task groups and context managers that must be entered and left
by the same task, so one task per server connects, serves and reconnects; tool calls from any
other task go through the live session it publishes. The supervisor:

- connects within ``startup_timeout`` and lists the tools (READY), or records why not (FAILED);
- notices a lost connection (the read stream ended, a call found it closed, or the periodic
  health check failed) and reconnects (RESTARTING), with exponential backoff between attempts;
- re-lists the tools when the server says they changed: ``notifications/tools/list_changed``
  on handshake-era connections, a ``subscriptions/listen`` stream on 2026-07-28 ones.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from typing import Any

import anyio
import structlog
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, Implementation
from mcp.types import Tool as McpTool
from mcp.types import ToolListChangedNotification as ToolsChanged

import agent_core.mcp._convert as convert
from agent_core.errors import ToolError
from agent_core.mcp._failures import Redactor, describe, unavailable
from agent_core.mcp._probes import check_alive, is_modern, list_tools
from agent_core.mcp._servers import ServerSpec, ServerState
from agent_core.mcp._toolset import ToolSet, build_tools
from agent_core.mcp._transport import open_transport
from agent_core.tools.base import Tool

log = structlog.get_logger(__name__)

CLIENT_INFO = Implementation(name="loopgate", version="0.1.0")
_CALL_GRACE = 1.0  # the SDK's own timeout answers first; ours only guards against a hang
_GRACEFUL_STOP = 1.0
_STOP_WAIT = 10.0  # a stdio shutdown takes up to ~6 s (stdin closed, SIGTERM, SIGKILL)
_RELISTEN_DELAY = 1.0


async def _ended(task: asyncio.Task[None], within: float) -> bool:
    done, _ = await asyncio.wait({task}, timeout=within)
    return bool(done)


class ServerConnection:
    def __init__(
        self,
        spec: ServerSpec,
        *,
        backoff_base: float,
        backoff_cap: float,
        health_interval: float,
        changed: Callable[[str], None],
    ) -> None:
        self.spec = spec
        self.state = ServerState.STOPPED if spec.enabled else ServerState.DISABLED
        self.error: str | None = None
        self.restarts = 0
        self.toolset = ToolSet()
        self._backoff = (backoff_base, backoff_cap)
        self._health_interval = health_interval
        self._changed = changed
        self._redact = Redactor(spec)
        self._client: Client | None = None  # published while READY, for calls from any task
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._settled = asyncio.Event()  # the first attempt is over (READY or FAILED)
        self._wake = asyncio.Event()  # something for the supervisor to look at
        self._lost: str | None = None
        self._refresh = False
        self._served = False  # the current attempt got READY: losing it means restarting
        self._generation = 0  # of attempts, so an old stream cannot end the current one
        self._stopping = False

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def tools(self) -> list[Tool]:
        """What the server offers now: nothing unless it is READY."""
        return list(self.toolset.tools) if self.state is ServerState.READY else []

    def start(self) -> None:
        if self._task is None and self.state is ServerState.STOPPED and not self._stopping:
            self.state = ServerState.STARTING
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.spec.name}")

    async def wait_settled(self) -> None:
        """Until the first attempt is over; TimeoutError after about ``startup_timeout``."""
        if self._task is not None:
            async with asyncio.timeout(self.spec.startup_timeout + _CALL_GRACE):
                await self._settled.wait()

    async def aclose(self) -> None:
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        # A serving connection winds down by itself; anything else (connecting, a request
        # pending) is cancelled. The SDK shields its own cleanup: stdio servers still get
        # their stdin closed, then SIGTERM, then SIGKILL.
        if task is not None and not await _ended(task, _GRACEFUL_STOP if self._client else 0):
            if self._scope is not None:
                self._scope.cancel()
            if not await _ended(task, _STOP_WAIT):
                task.cancel()
                await asyncio.wait({task})
        if self.state is not ServerState.DISABLED:
            self.state = ServerState.STOPPED

    # Calls, from any task.

    async def call(self, tool: str, original: str, arguments: dict[str, Any]) -> str:
        client = self._client
        if client is None or self.state is not ServerState.READY:
            raise ToolError(tool, self._unavailable())
        late = f"MCP server '{self.spec.name}' did not answer within {self.spec.timeout:g}s"
        try:
            async with asyncio.timeout(self.spec.timeout + _CALL_GRACE):
                result = await client.call_tool(
                    original, arguments, read_timeout_seconds=self.spec.timeout
                )
        except TimeoutError:
            raise ToolError(tool, late) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED and self._client is client:
                self._connection_lost("the connection closed during a call")
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(tool, late) from None
            raise ToolError(tool, self._failed(client, exc)) from None
        except Exception as exc:  # transport failures, invalid results: all are the server's
            raise ToolError(tool, self._failed(client, exc)) from None
        text = convert.result_text(result)
        if result.is_error:
            raise ToolError(tool, text)
        return text

    def _failed(self, client: Client, exc: Exception) -> str:
        if self._client is not client:  # the connection went away under the call
            return self._unavailable()
        if isinstance(exc, MCPError):
            return f"MCP server '{self.spec.name}' refused the call: {self._redact(exc.message)}"
        return f"MCP server '{self.spec.name}' failed: {self._describe(exc)}"

    def _unavailable(self) -> str:
        return unavailable(self.spec.name, self.state, self.error, stopping=self._stopping)

    # The supervisor.

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                reason = await self._attempt()
            except Exception as exc:  # anyio task groups raise transport failures from here
                reason = self._describe(exc)
            self._client = None
            if self._stopping or reason is None:
                break
            failures = 1 if self._served else failures + 1
            delay = self._down(reason, self._served, failures)
            self._wake.clear()
            if not self._stopping:
                with anyio.move_on_after(delay):  # unless aclose wakes it up
                    await self._wake.wait()
            self.restarts += 1
        self._settled.set()

    async def _attempt(self) -> str | None:
        """One connection from start to end: why it ended, or None when stopping."""
        self._lost, self._refresh, self._served = None, False, False
        self._generation += 1
        generation = self._generation
        deadline = anyio.current_time() + self.spec.startup_timeout
        with anyio.CancelScope(deadline=deadline) as scope:
            self._scope = scope
            client = Client(
                open_transport(self.spec, lambda: self._stream_ended(generation)),
                mode=self.spec.protocol,
                cache=None,  # after a list_changed the listing must come from the server
                message_handler=self._on_message,
                client_info=CLIENT_INFO,
            )
            async with client:
                self._up(client, await list_tools(client))
                scope.deadline = math.inf
                async with anyio.create_task_group() as tasks:
                    if is_modern(client):
                        tasks.start_soon(self._listen, client)
                    reason = await self._watch(client)
                    tasks.cancel_scope.cancel()
                self._client = None
                return reason
        if self._stopping:
            return None
        return self._lost or f"did not start within {self.spec.startup_timeout:g}s"

    def _up(self, client: Client, listing: list[McpTool]) -> None:
        self.toolset = build_tools(self.spec, listing, self.call)
        self._client, self.error, self.state = client, None, ServerState.READY
        self._served = True
        log.info(
            "mcp.server_ready",
            name=self.spec.name,
            transport=self.spec.kind,
            tools=len(self.toolset.tools),
            attempt=self.restarts + 1,
        )
        self._settled.set()
        self._changed(self.spec.name)

    def _down(self, reason: str, served: bool, failures: int) -> float:
        """Record the loss or the failure; the seconds to wait before the next attempt."""
        base, cap = self._backoff
        delay: float = min(cap, base * 2.0 ** (failures - 1)) * random.uniform(0.8, 1.0)
        self.error = reason
        self.state = ServerState.RESTARTING if served else ServerState.FAILED
        log.warning(
            "mcp.server_restarting" if served else "mcp.server_failed",
            name=self.spec.name,
            transport=self.spec.kind,
            error=reason,
            attempt=self.restarts + 1,
            retry_in=round(delay, 2),
        )
        self._settled.set()
        if served and self.toolset.tools:
            self._changed(self.spec.name)  # its tools are gone until it is back
        return delay

    async def _watch(self, client: Client) -> str | None:
        """Serve until stopped (None) or the connection is lost (why)."""
        while True:
            self._wake.clear()  # then look at the flags, so no wake-up is missed
            if self._stopping or self._lost is not None:
                return self._lost
            try:
                if self._refresh:
                    self._refresh = False
                    with anyio.fail_after(self.spec.startup_timeout):
                        await self._relist(client)
                    continue
                with anyio.move_on_after(self._health_interval) as idle:
                    await self._wake.wait()
                if idle.cancelled_caught:
                    with anyio.fail_after(self.spec.startup_timeout):
                        await check_alive(client)
            except TimeoutError:
                return f"no answer within {self.spec.startup_timeout:g}s"
            except Exception as exc:
                return self._describe(exc)

    async def _relist(self, client: Client) -> None:
        tools = build_tools(self.spec, await list_tools(client), self.call)
        if tools.signature != self.toolset.signature:
            self.toolset = tools
            log.info("mcp.tools_changed", name=self.spec.name, tools=len(tools.tools))
            self._changed(self.spec.name)

    async def _listen(self, client: Client) -> None:
        """Keep a tools subscription open (2026-07-28); its events arrive as notifications too."""
        while not self._stopping:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for _event in subscription:
                        self._request_refresh()
                return  # the server ended it gracefully
            except Exception as exc:
                log.debug("mcp.listen_lost", name=self.spec.name, error=self._describe(exc))
            await anyio.sleep(_RELISTEN_DELAY)
            self._request_refresh()  # changes may have gone by unseen

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolsChanged):
            self._request_refresh()
        elif isinstance(message, Exception):
            log.debug("mcp.transport_error", name=self.spec.name, error=self._describe(message))

    def _request_refresh(self) -> None:
        self._refresh = True
        self._wake.set()

    def _stream_ended(self, generation: int) -> None:
        if generation != self._generation:
            return  # an earlier connection's stream, ending late
        what = "the server process exited" if self.spec.kind == "stdio" else "the stream ended"
        self._connection_lost(what)

    def _connection_lost(self, reason: str) -> None:
        if self._lost is None and not self._stopping:
            self._lost = reason
            if self.state is ServerState.READY:
                # Calls fail fast from now on, before the supervisor even wakes up.
                self.state, self.error, self._client = ServerState.RESTARTING, reason, None
        self._wake.set()

    def _describe(self, exc: BaseException) -> str:
        reason = self._redact(describe(exc))
        if self._lost is not None and reason == "connection closed":
            return self._lost
        return reason
