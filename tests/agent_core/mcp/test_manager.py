"""McpManager against real MCP servers (tests/mcp_servers/demo.py) run as subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import ToolError
from agent_core.mcp._manager import McpManager
from agent_core.mcp._servers import ServerSpec, ServerState, ServerStatus
from agent_core.messages import ToolCall
from agent_core.tool_exec import ToolOutcome, execute_tool_calls
from agent_core.tools.base import Tool, ToolContext, ToolKind, ToolRegistry
from agent_core.tools.ranking import Entry, rank
from tests.mcp_servers.harness import stdio_spec
from tests.waiting import wait_until

CTX = ToolContext(Path("."), session_key="s", user_id="u", agent_id="a", run_id="r")
VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
FAST: dict[str, Any] = {"backoff_base": 0.05, "backoff_cap": 0.5, "health_interval": 30.0}


@asynccontextmanager
async def running(*specs: ServerSpec, **options: Any) -> AsyncIterator[McpManager]:
    manager = McpManager(specs, **{**FAST, **options})
    try:
        await manager.start()
        yield manager
    finally:
        await manager.aclose()


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def status(manager: McpManager, name: str = "demo") -> ServerStatus:
    return next(s for s in manager.statuses() if s.name == name)


async def call(manager: McpManager, tool: str, **arguments: Any) -> str:
    tools = by_name(await manager.tools())
    return await tools[tool].handler(arguments, CTX)


async def test_tools_are_namespaced_with_the_servers_own_definitions() -> None:
    async with running(
        stdio_spec("files"),
        stdio_spec("only", tools=("echo", "add")),
        stdio_spec("most", exclude_tools=("crash", "slow")),
        stdio_spec("off", enabled=False),
    ) as manager:
        states = {s.name: (s.state, s.transport, s.error) for s in manager.statuses()}
        assert states["files"] == (ServerState.READY, "stdio", None)
        assert status(manager, "off").state is ServerState.DISABLED
        assert status(manager, "off").tools == ()
        assert not manager.degraded

        tools = by_name(await manager.tools(["files"]))
        echo = tools["files__echo"]
        assert echo.description == "Echo the text back unchanged."
        assert echo.parameters["type"] == "object"
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.parameters["required"] == ["text"]
        assert (echo.read_only, echo.kind, echo.source) == (True, ToolKind.SYNC, "mcp:files")
        assert not tools["files__add"].read_only
        assert all(VALID.match(name) for name in tools)
        assert set(status(manager, "files").tools) == set(tools)

        # The call goes to the server's own name, whatever the model-facing one became.
        assert await echo.handler({"text": "héllo"}, CTX) == "héllo"
        weird = tools["files__weird_name_with_spaces"]
        assert weird.description == "Weird"  # no description: the title
        assert await weird.handler({}, CTX) == "weird called"
        [long_name] = [name for name in tools if name.startswith("files__xxx")]
        assert len(long_name) == 64
        assert await tools[long_name].handler({}, CTX) == "long called"

        # Allow-list and exclusions: a filtered tool has no Tool, so it cannot be called.
        assert set(by_name(await manager.tools(["only"]))) == {"only__echo", "only__add"}
        most = by_name(await manager.tools(["most"]))
        assert "most__echo" in most and "most__crash" not in most and "most__slow" not in most
        every = await manager.tools()
        assert {tool.source for tool in every} == {"mcp:files", "mcp:only", "mcp:most"}


async def test_results_become_text_and_error_results_become_tool_errors() -> None:
    async with running(stdio_spec()) as manager:
        assert await call(manager, "demo__add", a=2, b=3) == "5"
        image = await call(manager, "demo__image")
        assert re.fullmatch(r"\[image: image/png, \d+ bytes base64 — not shown\]", image)
        assert json.loads(await call(manager, "demo__structured")) == {
            "temperature": 21.5,
            "unit": "C",
        }
        mixed = (await call(manager, "demo__mixed")).split("\n")
        assert mixed[0:2] == ["first", "note body"]
        assert mixed[2].startswith("[resource: file:///x.bin, application/pdf, ")
        assert mixed[3] == "[resource link: big.csv <file:///big.csv>]"
        with pytest.raises(ToolError, match=r"^kaputt$"):
            await call(manager, "demo__fail", reason="kaputt")
        with pytest.raises(ToolError):  # the server rejects the arguments
            await call(manager, "demo__add", a="not a number", b=1)
        with pytest.raises(ToolError, match=r"^MCP server 'demo' refused the call: bad thing$"):
            await call(manager, "demo__protocol_error")
        assert status(manager).state is ServerState.READY


async def test_a_call_that_takes_too_long_times_out_and_the_server_stays_usable() -> None:
    async with running(stdio_spec(timeout=0.5)) as manager:
        started = time.monotonic()
        with pytest.raises(ToolError, match=r"^MCP server 'demo' did not answer within 0.5s$"):
            await call(manager, "demo__slow", seconds=30)
        assert time.monotonic() - started < 3
        assert await call(manager, "demo__echo", text="still here") == "still here"
        assert status(manager).state is ServerState.READY


async def test_a_server_that_crashes_in_a_call_is_restarted() -> None:
    async with running(stdio_spec(), backoff_base=0.5) as manager:
        changes: list[str] = []
        manager.on_change(changes.append)
        echo = by_name(await manager.tools())["demo__echo"]
        first_pid = await call(manager, "demo__pid")

        with pytest.raises(ToolError, match="MCP server 'demo'"):
            await call(manager, "demo__crash")
        # Lost at once: calls fail fast, the server offers nothing, the manager is degraded.
        assert status(manager).state is ServerState.RESTARTING
        assert manager.degraded
        assert await manager.tools() == []
        started = time.monotonic()
        with pytest.raises(ToolError, match="MCP server 'demo' is restarting"):
            await echo.handler({"text": "x"}, CTX)
        assert time.monotonic() - started < 0.5

        await wait_until(lambda: status(manager).state is ServerState.READY)
        assert (status(manager).restarts, status(manager).error) == (1, None)
        assert not manager.degraded
        assert changes == ["demo", "demo"]  # its tools went away, then came back
        assert await echo.handler({"text": "back"}, CTX) == "back"  # the old Tool works again
        assert await call(manager, "demo__pid") != first_pid


async def test_a_server_that_dies_while_idle_is_noticed_and_restarted() -> None:
    async with running(stdio_spec(), backoff_base=0.2) as manager:
        pid = int(await call(manager, "demo__pid"))
        os.kill(pid, signal.SIGKILL)
        # No call and no health check (30 s away): the end of its output gives it away.
        await wait_until(lambda: status(manager).state is not ServerState.READY, timeout=3)
        assert status(manager).error == "the server process exited"
        await wait_until(lambda: status(manager).state is ServerState.READY)
        assert int(await call(manager, "demo__pid")) != pid


# A program that runs (writing its pid to argv[1] when given) but never answers.
NEVER_ANSWERS = (
    "-c",
    "import os, sys\n"
    "if sys.argv[1:]: open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "sys.stdin.read()",
)


async def test_servers_that_cannot_start_fail_alone_and_are_retried() -> None:
    started = time.monotonic()
    async with running(
        stdio_spec("good"),
        ServerSpec("missing", command="/nonexistent/mcp-server"),
        ServerSpec("mute", command=sys.executable, args=NEVER_ANSWERS, startup_timeout=0.5),
    ) as manager:
        assert time.monotonic() - started < 10
        assert status(manager, "good").state is ServerState.READY
        missing, silent = status(manager, "missing"), status(manager, "mute")
        assert missing.state is ServerState.FAILED
        assert "No such file or directory" in (missing.error or "")
        assert silent.state is ServerState.FAILED
        assert silent.error == "did not start within 0.5s"
        assert manager.degraded
        assert {tool.source for tool in await manager.tools()} == {"mcp:good"}
        await wait_until(lambda: status(manager, "missing").restarts >= 2)
        assert status(manager, "missing").state is ServerState.FAILED


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_changed_tool_list_is_picked_up(protocol: str) -> None:
    # "auto" speaks 2026-07-28 with this server (a subscriptions/listen stream); "legacy" gets
    # a plain notifications/tools/list_changed.
    async with running(stdio_spec(protocol=protocol)) as manager:
        changes: list[str] = []
        manager.on_change(changes.append)
        assert await call(manager, "demo__add_tool", name="fresh") == "added"
        await wait_until(lambda: changes == ["demo"], timeout=5)
        fresh = by_name(await manager.tools())["demo__fresh"]
        assert fresh.description == "Added at run time: fresh"
        assert await fresh.handler({}, CTX) == "fresh called"
        assert "demo__fresh" in status(manager).tools


async def test_lazy_servers_start_when_their_tools_are_first_needed() -> None:
    async with running(stdio_spec("a"), stdio_spec("b"), lazy=True) as manager:
        assert {s.state for s in manager.statuses()} == {ServerState.STOPPED}
        assert not manager.degraded
        tools = await manager.tools(["a"])
        assert tools and all(tool.name.startswith("a__") for tool in tools)
        assert status(manager, "a").state is ServerState.READY
        assert status(manager, "b").state is ServerState.STOPPED
        assert await manager.tools(["unknown"]) == []


async def test_read_only_mcp_tools_run_in_parallel_and_the_others_in_turn() -> None:
    async def nothing(_: Any) -> None:
        return None

    async def spans(tool: str) -> list[tuple[float, float]]:
        calls = [
            ToolCall(str(i), f"demo__{tool}", json.dumps({"seconds": 0.4, "tag": str(i)}))
            for i in range(2)
        ]
        outcomes: list[ToolOutcome] = await execute_tool_calls(
            calls, registry, CTX, before=nothing, after=nothing
        )
        assert not any(outcome.is_error for outcome in outcomes)
        result = []
        for i, outcome in enumerate(outcomes):
            tag, start, end = outcome.content.split()
            assert tag == str(i)  # results keep the calls' order
            result.append((float(start), float(end)))
        return result

    async with running(stdio_spec()) as manager:
        registry = ToolRegistry.of(await manager.tools())
        (a_start, a_end), (b_start, b_end) = await spans("slow_read")
        assert b_start < a_end and a_start < b_end  # they overlapped
        (a_start, a_end), (b_start, b_end) = await spans("slow_write")
        assert b_start >= a_end  # one after the other


async def test_a_hundred_tools_keep_distinct_names_and_descriptions() -> None:
    async with running(stdio_spec("many", "--tools", "100")) as manager:
        generated = [t for t in await manager.tools() if t.name.startswith("many__gen_")]
        assert len(generated) == 100
        assert len({t.name for t in generated}) == len({t.description for t in generated}) == 100
        assert all(t.read_only for t in generated)
        assert await by_name(generated)["many__gen_57"].handler({"query": "q"}, CTX) == "gen_57: q"
        hits = rank("invoice", [Entry(t, t.name, t.description) for t in generated], limit=20)
        assert len(hits) == 13 and all("invoice" in hit.item.description for hit in hits)


async def test_aclose_leaves_no_process_and_no_task(tmp_path: Path) -> None:
    manager = McpManager([stdio_spec("a"), stdio_spec("b")], **FAST)
    await manager.start()
    pids = [int(await call(manager, f"{name}__pid")) for name in ("a", "b")]
    tools = by_name(await manager.tools())
    started = tmp_path / "started"
    arguments = {"seconds": 30, "started": str(started)}
    in_flight = asyncio.create_task(tools["a__slow"].handler(arguments, CTX))
    await wait_until(started.exists, 10)  # the call is running in the server

    await manager.aclose()
    with pytest.raises(ToolError, match="MCP server 'a' was shut down"):
        await in_flight
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    await manager.aclose()  # idempotent
    assert await manager.tools() == []
    assert {s.state for s in manager.statuses()} == {ServerState.STOPPED}
    with pytest.raises(ToolError, match="was shut down"):
        await tools["b__echo"].handler({"text": "x"}, CTX)


async def test_aclose_stops_a_server_that_is_still_starting(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    mute = ServerSpec("mute", command=sys.executable, args=(*NEVER_ANSWERS, str(pid_file)))
    manager = McpManager([mute], **FAST)
    starting = asyncio.create_task(manager.start())
    await wait_until(pid_file.exists)
    assert status(manager, "mute").state is ServerState.STARTING
    started = time.monotonic()
    await manager.aclose()
    assert time.monotonic() - started < 5
    await starting  # start() returns, it does not raise
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
