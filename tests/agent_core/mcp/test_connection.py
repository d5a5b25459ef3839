"""One server's connection driven directly: its states, calls, losses and restarts."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ToolError
from agent_core.mcp._connection import ServerConnection
from agent_core.mcp._servers import ServerSpec, ServerState
from agent_core.tools.base import ToolContext
from tests.mcp_servers.harness import stdio_spec
from tests.waiting import wait_until

CTX = ToolContext(Path("."), session_key="s", user_id="u", agent_id="a", run_id="r")


def connection(
    spec: ServerSpec, changes: list[str] | None = None, **options: Any
) -> ServerConnection:
    settings: dict[str, Any] = {"backoff_base": 0.05, "backoff_cap": 0.5, "health_interval": 30.0}
    sink = changes if changes is not None else []
    return ServerConnection(spec, changed=sink.append, **{**settings, **options})


def state(conn: ServerConnection) -> ServerState:
    """Read afresh (the connection's own task changes it)."""
    return conn.state


@asynccontextmanager
async def started(conn: ServerConnection) -> AsyncIterator[ServerConnection]:
    conn.start()
    try:
        await conn.wait_settled()
        yield conn
    finally:
        await conn.aclose()


async def test_a_new_connection_is_stopped_or_disabled_and_offers_nothing() -> None:
    stopped = connection(stdio_spec())
    disabled = connection(stdio_spec(enabled=False))
    assert (stopped.state, disabled.state) == (ServerState.STOPPED, ServerState.DISABLED)
    assert not stopped.started and stopped.tools == [] and stopped.restarts == 0
    disabled.start()  # a disabled server never starts
    assert not disabled.started and disabled.state is ServerState.DISABLED
    await disabled.wait_settled()  # nothing to wait for
    await disabled.aclose()
    assert disabled.state is ServerState.DISABLED


async def test_a_call_before_the_server_is_ready_says_so() -> None:
    conn = connection(stdio_spec())
    with pytest.raises(ToolError, match=r"^MCP server 'demo' is not ready yet$"):
        await conn.call("demo__echo", "echo", {"text": "x"})
    disabled = connection(stdio_spec(enabled=False))
    with pytest.raises(ToolError, match=r"^MCP server 'demo' is disabled$"):
        await disabled.call("demo__echo", "echo", {"text": "x"})


async def test_a_ready_server_offers_its_tools_and_announces_them() -> None:
    changes: list[str] = []
    async with started(connection(stdio_spec(), changes)) as conn:
        assert conn.state is ServerState.READY and conn.error is None
        assert changes == ["demo"]
        names = {tool.name for tool in conn.tools}
        assert {"demo__echo", "demo__add"} <= names
        assert await conn.call("demo__echo", "echo", {"text": "hi"}) == "hi"
        conn.start()  # already running: no second supervisor
        assert changes == ["demo"]
    assert state(conn) is ServerState.STOPPED and conn.tools == []
    with pytest.raises(ToolError, match="was shut down"):
        await conn.call("demo__echo", "echo", {"text": "x"})
    conn.start()  # a closed connection does not come back
    assert not conn.started


async def test_an_error_result_and_a_refused_call_become_tool_errors() -> None:
    async with started(connection(stdio_spec())) as conn:
        with pytest.raises(ToolError, match=r"^nope$"):
            await conn.call("demo__fail", "fail", {"reason": "nope"})
        with pytest.raises(ToolError, match=r"^MCP server 'demo' refused the call: bad thing$"):
            await conn.call("demo__protocol_error", "protocol_error", {})
        with pytest.raises(ToolError) as unknown:
            await conn.call("demo__gone", "no_such_tool", {})
        assert unknown.value.tool_name == "demo__gone"
        assert conn.state is ServerState.READY


async def test_a_failed_start_is_retried_with_backoff_and_counts_restarts() -> None:
    changes: list[str] = []
    spec = ServerSpec("missing", command="/nonexistent/mcp-server")
    async with started(connection(spec, changes, backoff_base=0.05, backoff_cap=0.1)) as conn:
        assert conn.state is ServerState.FAILED
        assert "No such file or directory" in (conn.error or "")
        with pytest.raises(ToolError, match=r"^MCP server 'missing' is unavailable: "):
            await conn.call("missing__t", "t", {})
        await wait_until(lambda: conn.restarts >= 3)
        assert conn.state is ServerState.FAILED
    assert changes == []  # it never offered anything, so nothing changed


async def test_a_server_that_stops_answering_is_caught_by_the_health_check() -> None:
    spec = stdio_spec(startup_timeout=3.0)
    async with started(connection(spec, health_interval=0.1, backoff_base=10.0)) as conn:
        pid = int(await conn.call("demo__pid", "pid", {}))
        os.kill(pid, signal.SIGSTOP)
        try:
            await wait_until(lambda: conn.state is ServerState.RESTARTING)
            assert conn.error == "no answer within 3s"
            assert conn.tools == []
        finally:
            # Restarting kills the stopped process; if it has not got that far, let it go.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


async def test_a_late_end_of_an_earlier_connection_does_not_end_the_current_one() -> None:
    async with started(connection(stdio_spec())) as conn:
        conn._stream_ended(conn._generation - 1)
        assert conn.state is ServerState.READY
        assert await conn.call("demo__echo", "echo", {"text": "still"}) == "still"
        conn._stream_ended(conn._generation)
        assert state(conn) is ServerState.RESTARTING
        assert conn.error == "the server process exited"
        await wait_until(lambda: conn.state is ServerState.READY)
        assert conn.restarts == 1


async def test_what_the_server_says_is_redacted_of_the_configured_secrets() -> None:
    # The demo refuses protocol_error with "bad thing": configured as a secret, it is masked.
    spec = stdio_spec(env={"DEMO_TOKEN": "bad thing"})
    async with started(connection(spec)) as conn:
        with pytest.raises(ToolError, match=r"^MCP server 'demo' refused the call: \*\*\*$"):
            await conn.call("demo__protocol_error", "protocol_error", {})
