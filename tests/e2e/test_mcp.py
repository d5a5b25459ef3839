"""MCP tools end to end: web chat → gateway → agent loop → fake LLM over HTTP, with the tool
calls going to a real MCP server (tests/mcp_servers/demo.py, the SDK's own server) run as a
subprocess over stdio or HTTP; plus ``/healthz`` and ``loopgate mcp list`` as operators use them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent_core import RunStatus
from agent_core.mcp._servers import ServerState
from bot.app import Loopgate
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.orchestration_support import dm, offered_tools, system_prompt, tool_results
from tests.paths import TESTS
from tests.service_support import free_port, run_cli, start_server, until
from tests.waiting import wait_until

DEMO = str(TESTS / "mcp_servers" / "demo.py")


def demo(*args: str, **options: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO, *args], **options}


@asynccontextmanager
async def service(
    tmp_path: Path, llm: FakeLLM, servers: dict[str, Any], **agents: Any
) -> AsyncIterator[Loopgate]:
    config = make_config(tmp_path, llm, mcp={"servers": servers}, agents=agents)
    async with Loopgate(config) as app:
        yield app


def tool_spec(request: Any, name: str) -> dict[str, Any]:
    return next(
        t["function"] for t in request.json.get("tools") or [] if t["function"]["name"] == name
    )


class TestCalls:
    async def test_a_call_and_its_result(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(
            tool_calls(call("demo__echo", {"text": "hello over stdio"})),
            text("The server said hello."),
        )
        async with service(tmp_path, llm, {"demo": demo()}) as app:
            chat = dm(app)
            result = await chat.ask("echo something")
            assert result is not None and result.status is RunStatus.COMPLETED
            assert chat.texts() == ["The server said hello."]
            first, second = llm.chat_requests
            spec = tool_spec(first, "demo__echo")
            assert spec["description"] == "Echo the text back unchanged."
            assert spec["parameters"]["properties"]["text"]["type"] == "string"
            assert "## MCP tools" in system_prompt(first)
            assert "- demo__echo: Echo the text back unchanged." in system_prompt(first)
            assert tool_results(second) == ["hello over stdio"]

    async def test_read_only_tools_run_in_parallel_and_others_in_turn(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        def spans(request: Any) -> list[tuple[float, float]]:
            return [tuple(map(float, r.split()[-2:])) for r in tool_results(request)]  # type: ignore[misc]

        llm.script(
            tool_calls(
                call("demo__slow_read", {"seconds": 0.4, "tag": "a"}),
                call("demo__slow_read", {"seconds": 0.4, "tag": "b"}),
            ),
            tool_calls(
                call("demo__slow_write", {"seconds": 0.3, "tag": "c"}),
                call("demo__slow_write", {"seconds": 0.3, "tag": "d"}),
            ),
            text("done"),
        )
        async with service(tmp_path, llm, {"demo": demo()}) as app:
            await dm(app).ask("go")
        (a_start, a_end), (b_start, b_end) = spans(llm.chat_requests[1])
        assert a_start < b_end and b_start < a_end  # overlapped
        (_, c_end), (d_start, _) = spans(llm.chat_requests[2])[-2:]
        assert d_start >= c_end  # one after the other

    async def test_errors_become_tool_results_not_failed_runs(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(
                call("demo__slow", {"seconds": 5}),
                call("demo__fail", {"reason": "quota exceeded"}),
                call("demo__image", {}),
            ),
            text("I could not finish."),
        )
        async with service(tmp_path, llm, {"demo": demo(timeout=0.5)}) as app:
            result = await dm(app).ask("try it")
            assert result is not None and result.status is RunStatus.COMPLETED
        timeout, failed, image = tool_results(llm.chat_requests[1])
        assert "demo" in timeout and "0.5" in timeout
        assert "quota exceeded" in failed
        assert "image/png" in image and "base64" not in image.split("image/png")[0]

    async def test_a_crashed_server_is_restarted(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(
            tool_calls(call("demo__pid", {})),
            text("first"),
            tool_calls(call("demo__crash", {})),
            text("it crashed"),
        )
        async with service(tmp_path, llm, {"demo": demo()}) as app:
            chat = dm(app)
            await chat.ask("pid")
            old_pid = int(tool_results(llm.chat_requests[1])[0])
            result = await chat.ask("crash it")
            assert result is not None and result.status is RunStatus.COMPLETED
            assert chat.texts()[-1] == "it crashed"
            assert "demo" in tool_results(llm.chat_requests[3])[-1]

            def restarted() -> bool:
                status = app.mcp.statuses()[0]
                return status.state is ServerState.READY and status.restarts >= 1

            await until(restarted, lambda: str(app.mcp.statuses()), timeout=20)
            llm.script(tool_calls(call("demo__pid", {})), text("back"))
            await chat.ask("pid again")
            assert int(tool_results(llm.chat_requests[-1])[-1]) != old_pid

    async def test_a_changed_tool_list_reaches_the_agent(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("demo__add_tool", {"name": "fresh"})), text("added"))
        async with service(tmp_path, llm, {"demo": demo()}) as app:
            chat = dm(app)
            await chat.ask("add a tool")
            assert "demo__fresh" not in offered_tools(llm.chat_requests[0])

            async def offered_next() -> bool:
                return "demo__fresh" in (await app.gateway.router.resolve("main")).tools

            await wait_until(offered_next, 10, what="the new tool never reached the agent")
            llm.script(tool_calls(call("demo__fresh", {})), text("called it"))
            await chat.ask("use it")
            assert "demo__fresh" in offered_tools(llm.chat_requests[2])
            assert tool_results(llm.chat_requests[3])[-1] == "fresh called"


class TestSelection:
    async def test_allow_list_exclusions_and_per_agent_servers(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        servers = {
            "a": demo(tools=["echo", "add", "pid"], exclude_tools=["pid"]),
            "b": demo(),
        }
        llm.script(text("main here"))
        agents = {"list": [{"id": "main"}, {"id": "support", "mcp_servers": ["a"]}]}
        async with service(tmp_path, llm, servers, **agents) as app:
            await dm(app).ask("hi")
            support = await app.gateway.router.resolve("support")
            main = await app.gateway.router.resolve("main")
        offered = offered_tools(llm.chat_requests[0])
        assert {"a__echo", "a__add", "b__echo"} <= offered
        assert "a__pid" not in offered and "a__crash" not in offered
        support_mcp = {n for n, t in support.tools.tools.items() if t.source}
        assert support_mcp == {"a__echo", "a__add"}
        assert "b__echo" in main.tools


class TestSearchMode:
    async def test_a_hundred_tools_are_found_by_search(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(
            tool_calls(call("mcp_tool_search", {"query": "invoice variant 9", "limit": 3})),
            tool_calls(call("many__gen_9", {"query": "march"})),
            text("Found it."),
        )
        async with service(tmp_path, llm, {"many": demo("--tools", "100")}) as app:
            result = await dm(app).ask("find my invoice tool")
            assert result is not None and result.status is RunStatus.COMPLETED
        first, second, third = llm.chat_requests
        offered = offered_tools(first)
        assert "mcp_tool_search" in offered
        assert not any(name.startswith("many__") for name in offered)
        assert "## MCP tools (search)" in system_prompt(first)
        found = tool_results(second)[0]
        assert json.loads(found[found.index("[") :])[0]["name"] == "many__gen_9"
        assert "many__gen_9" in offered_tools(third)
        assert tool_results(third)[-1] == "gen_9: march"


class TestOperators:
    async def test_http_server_and_a_broken_one_degrade_healthz(self, tmp_path: Path) -> None:
        port = free_port()
        server = await asyncio.create_subprocess_exec(
            sys.executable, DEMO, "--http", str(port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            config = {
                "mcp": {
                    "servers": {
                        "remote": {"url": f"http://127.0.0.1:{port}/mcp", "startup_timeout": 20},
                        "broken": {"command": sys.executable, "args": ["-c", "exit(3)"]},
                    }
                },
                "providers": {"openai": {"base_url": "http://127.0.0.1:9/v1", "api_key": "k"}},
            }
            (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            await until_port(port)
            proc, base = await start_server(tmp_path, stderr=asyncio.subprocess.DEVNULL)
            try:
                async with httpx.AsyncClient() as client:
                    health = (await client.get(f"{base}/healthz")).json()
                assert health["status"] == "degraded"
                assert health["mcp"] == {"remote": "ready", "broken": "failed"}
            finally:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 20)

            code, out, err = await run_cli(tmp_path, "mcp", "list")
            assert code == 1, err
            assert "remote" in out and "streamable_http" in out and "ready" in out
            assert "broken" in out and "failed" in out
            assert "remote__echo" in out and "read-only" in out
            assert "broken" in err
            code, out, _ = await run_cli(tmp_path, "mcp", "list", "--json")
            listed = {s["name"]: s for s in json.loads(out)["servers"]}
            assert listed["remote"]["state"] == "ready"
            assert any(t["name"] == "remote__add" for t in listed["remote"]["tools"])
        finally:
            server.terminate()
            await server.wait()


async def until_port(port: int, timeout: float = 20) -> None:
    async def connectable() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        await writer.wait_closed()
        return True

    await wait_until(connectable, timeout, interval=0.1, what=f"nothing listens on {port}")
