"""Tool-iteration benchmark: framework overhead per loop iteration beside the tools' own time.

Each run makes 5 tool iterations of 4 parallel read-only tool calls, then answers, against an
instant in-process provider and an in-memory store. Every tool sleeps ``--tool-ms``; the
overhead of an iteration is its wall time minus the longest tool of its batch (the batch runs
in parallel, so that is the time the tools themselves needed).

Then the orchestration overhead (nothing of it is LLM time: the provider answers at once):
a ``spawn`` round-trip (the parent's tool call → its result, i.e. a whole child run with its
Minimal prompt, in-memory history write and trace), and one batch of 8 parallel children
(``max_parallel_children: 8``), first call → last result.

Last, one tool call's round-trip (tool-call event → tool-result event) of a built-in tool beside
the same ``echo`` on a real MCP server (tests/mcp_servers/demo.py, the SDK's own server) over
stdio and over streamable HTTP: the difference is what the MCP bridge costs (client session,
JSON-RPC, transport, result conversion).

    python benchmarks/tool_iterations.py [--runs 200] [--tool-ms 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_core import AgentSettings, Event, EventBus, EventType, Loop, MemoryStore, RunRequest
from agent_core.mcp._manager import McpManager
from agent_core.mcp._servers import ServerSpec
from agent_core.orchestration.children import Orchestrator
from agent_core.orchestration.tools import spawn_tool
from agent_core.providers.base import DeltaHandler, ModelRequest, ModelResponse
from agent_core.settings import CompactionSettings
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from agent_core.tools import Tool, ToolContext, ToolRegistry
from bot.logging_setup import configure_logging

ITERATIONS = 5
PARALLEL = 4
DEMO_SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "demo.py"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(runs: int, tool_ms: float, workdir: Path) -> None:
    tool_time: dict[str, float] = {}  # call id -> seconds inside the tool

    async def probe(args: dict[str, Any], ctx: ToolContext) -> str:
        t0 = time.perf_counter()
        await asyncio.sleep(tool_ms / 1000)
        tool_time[str(args["id"])] = time.perf_counter() - t0
        return "ok"

    tools = ToolRegistry.of([Tool("probe", "p", {"type": "object"}, probe, read_only=True)])
    bus = EventBus()
    marks: list[tuple[str, int, float]] = []

    async def on_event(event: Event) -> None:
        if event.type is EventType.ACTIVITY and event.payload["phase"] == "thinking":
            marks.append((event.run_id, int(event.payload["iteration"]), time.perf_counter()))

    bus.subscribe(on_event)
    store = MemoryStore()
    overhead: list[float] = []
    tools_only: list[float] = []
    for n in range(runs):
        script = [
            tool_calls(*(call("probe", {"id": f"{n}-{i}-{k}"}) for k in range(PARALLEL)))
            for i in range(ITERATIONS)
        ]
        provider = ScriptedProvider(*script, reply("done"))
        loop = Loop(
            # No post-run compaction: its memory-flush turn would ask the scripted provider.
            AgentSettings(
                id="main",
                model="m",
                workspace=workdir,
                compaction=CompactionSettings(enabled=False),
            ),
            provider,
            tools,
            store,
            store,
            bus,
        )
        marks.clear()
        await loop.run(RunRequest(session_key=f"s{n % 20}", message="go", user_id="u"))
        for i in range(ITERATIONS):
            span = marks[i + 1][2] - marks[i][2]
            slowest = max(tool_time[f"{n}-{i}-{k}"] for k in range(PARALLEL))
            overhead.append((span - slowest) * 1000)
            tools_only.append(slowest * 1000)
    print(f"runs={runs} iterations/run={ITERATIONS} parallel tools/iteration={PARALLEL}")
    print(
        f"framework overhead per iteration: p50={statistics.median(overhead):.3f}ms "
        f"p99={pct(overhead, 0.99):.3f}ms"
    )
    print(
        f"tool time per iteration (slowest of the batch): "
        f"p50={statistics.median(tools_only):.3f}ms "
        f"p99={pct(tools_only, 0.99):.3f}ms"
    )


class SpawningProvider:
    """The parent asks for ``children`` spawns, then answers; every child answers at once."""

    name = "instant"

    def __init__(self, children: int) -> None:
        self.children = children

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        if "/spawn/" in request.messages[0].content:
            return reply("child result")
        if request.messages[-1].role == "tool":
            return reply("done")
        return tool_calls(*(call("spawn", {"task": f"part {k}"}) for k in range(self.children)))

    async def aclose(self) -> None:
        return None


async def bench_children(runs: int, children: int, workdir: Path) -> list[float]:
    """Milliseconds from the batch's first spawn call to its last result, per run."""
    bus = EventBus()
    store = MemoryStore()
    settings = AgentSettings(
        id="main", model="m", workspace=workdir, max_parallel_children=max(children, 1)
    )
    loops: dict[str, Loop] = {}

    async def resolve(agent_id: str) -> Loop:
        return loops[agent_id]

    orchestrator = Orchestrator(resolve, bus)
    tools = ToolRegistry.of([spawn_tool(orchestrator, settings)])
    loops["main"] = Loop(settings, SpawningProvider(children), tools, store, store, bus)
    first: dict[str, float] = {}
    last: dict[str, float] = {}

    async def on_event(event: Event) -> None:
        if event.type is EventType.TOOL_CALL:
            first.setdefault(event.run_id, time.perf_counter())
        elif event.type is EventType.TOOL_RESULT:
            last[event.run_id] = time.perf_counter()

    bus.subscribe(on_event)
    took: list[float] = []
    for n in range(runs + 5):  # 5 warm-up runs (workspace seeding, imports)
        request = RunRequest(session_key=f"p{n}", message="go", user_id="u")
        await loops["main"].run(request)
        if n >= 5:
            took.append((last[request.run_id] - first[request.run_id]) * 1000)
    return took


async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
    return str(args["text"])


async def round_trips(loop: Loop, bus: EventBus, tool: str, runs: int) -> list[float]:
    """Milliseconds from the tool-call event to the tool-result event of one call, per run."""
    started: dict[str, float] = {}
    took: list[float] = []

    async def on_event(event: Event) -> None:
        if event.type is EventType.TOOL_CALL and event.payload["name"] == tool:
            started[event.run_id] = time.perf_counter()
        elif event.type is EventType.TOOL_RESULT and event.run_id in started:
            took.append((time.perf_counter() - started.pop(event.run_id)) * 1000)

    unsubscribe = bus.subscribe(on_event)
    loop.provider = ScriptedProvider(
        *(
            item
            for _ in range(runs + 5)
            for item in (tool_calls(call(tool, {"text": "hi"})), reply("ok"))
        )
    )
    for n in range(runs + 5):
        await loop.run(RunRequest(session_key=f"{tool}{n % 20}", message="go", user_id="u"))
    unsubscribe()
    return took[5:]  # the first calls warm up sessions, workspaces and connections


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bench_mcp(runs: int, workdir: Path) -> None:
    port = free_port()
    http = await asyncio.create_subprocess_exec(
        sys.executable, str(DEMO_SERVER), "--http", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    specs = [
        ServerSpec("stdio", command=sys.executable, args=(str(DEMO_SERVER),)),
        ServerSpec("http", url=f"http://127.0.0.1:{port}/mcp"),
    ]
    manager = McpManager(specs)
    try:
        for _ in range(100):  # the HTTP server needs a moment to listen
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        await manager.start()
        tools = ToolRegistry.of([Tool("echo", "e", {"type": "object"}, echo, read_only=True)])
        for tool in await manager.tools():
            tools.register(tool)
        bus, store = EventBus(), MemoryStore()
        settings = AgentSettings(
            id="main", model="m", workspace=workdir, compaction=CompactionSettings(enabled=False)
        )
        loop = Loop(settings, ScriptedProvider(), tools, store, store, bus)
        results = {name: await round_trips(loop, bus, name, runs) for name in
                   ("echo", "stdio__echo", "http__echo")}  # fmt: skip
    finally:
        await manager.aclose()
        http.terminate()
        await http.wait()
    base = statistics.median(results["echo"])
    print(f"one tool call, tool-call event → tool-result event ({runs} calls each):")
    for name, took in results.items():
        median = statistics.median(took)
        print(
            f"  {name:<12} p50={median:.3f}ms p99={pct(took, 0.99):.3f}ms "
            f"(MCP overhead p50={median - base:.3f}ms, {median / base:.1f}x built-in)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tool-ms", type=float, default=1.0)
    args = parser.parse_args()
    configure_logging("warning", "console")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.runs, args.tool_ms, Path(tmp)))
        for children in (1, 8):
            took = asyncio.run(bench_children(args.runs, children, Path(tmp) / f"c{children}"))
            what = "spawn round-trip" if children == 1 else f"{children} parallel children"
            print(
                f"{what} overhead: p50={statistics.median(took):.3f}ms p99={pct(took, 0.99):.3f}ms"
            )
        asyncio.run(bench_mcp(args.runs, Path(tmp) / "mcp"))


if __name__ == "__main__":
    main()
