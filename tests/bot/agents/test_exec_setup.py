"""``tools.exec`` from config to each agent: the sandbox probed at start-up, ``exec`` offered
only when it works (never a silent fallback), ``disabled_tools``, and prompt sections 4, 5
and 14 that follow what is offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent_core import EventBus, MemoryStore, RunRequest
from agent_core.prompt import build_system_prompt
from bot.agents.exec_setup import ExecRuntime, prepare_exec
from bot.agents.router import AgentRouter
from bot.app import Loopgate
from bot.config import Config, parse_config
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.exec_support import needs_bwrap
from tests.fakes.llm_server import FakeLLM

GH = {"command": "gh", "env": {"GH_TOKEN": "ghp_never_in_the_prompt"}}


def config(tmp_path: Path, agents: list[dict[str, Any]] | None = None, **exec_keys: Any) -> Config:
    data: dict[str, Any] = {
        "agents": {
            "defaults": {"workspace": str(tmp_path), "owner_ids": ["telegram:1"]},
            "list": agents or [],
        },
        "tools": {"exec": {"enabled": True, **exec_keys}},
    }
    return parse_config(data, {})


def router(cfg: Config, runtime: ExecRuntime | None) -> AgentRouter:
    store = MemoryStore()
    return AgentRouter(cfg, store=store, traces=store, events=EventBus(), exec_runtime=runtime)


def prompt(r: AgentRouter, agent: str = "main", **request: Any) -> str:
    loop = r.get(agent)
    req = RunRequest("s", "hi", request.pop("user_id", "telegram:1"), **request)
    return build_system_prompt(loop.settings, req, loop.tools, Path("/tmp/ws"))


async def test_off_means_nothing_is_probed(tmp_path: Path) -> None:
    cfg = parse_config({}, {})
    with capture_logs() as logs:
        assert await prepare_exec(cfg) is None
    assert not [e for e in logs if e["event"].startswith("exec.")]
    assert "exec" not in router(cfg, None).get("main").tools


@needs_bwrap
class TestOffered:
    async def test_offered_with_its_sections(self, tmp_path: Path) -> None:
        cfg = config(tmp_path, network=True, timeout=20, credentials={"github": GH})
        with capture_logs() as logs:
            runtime = await prepare_exec(cfg)
        assert runtime is not None and runtime.available
        assert [e["event"] for e in logs] == ["exec.ready"]
        r = router(cfg, runtime)
        assert "exec" in r.get("main").tools
        text = prompt(r)
        assert "- exec: Run a shell command line" in text  # section 4
        assert "## Credentialed CLIs" in text and "gh" in text  # section 5
        assert "ghp_never_in_the_prompt" not in text
        sandbox = text.split("## Sandbox\n", 1)[1].split("\n\n", 1)[0]  # section 14
        assert "bwrap sandbox; your workspace is /workspace" in sandbox
        assert "Network: on" in sandbox and "20 s" in sandbox and "512 MiB" in sandbox
        assert "Approval: commands run without approval" in sandbox  # the owner's DM
        group = prompt(r, chat_type="group")
        assert "/approve or /deny" in group.split("## Sandbox\n", 1)[1]

    async def test_disabled_tools_take_it_away(self, tmp_path: Path) -> None:
        agents = [{"id": "locked", "disabled_tools": ["exec"]}]
        cfg = config(tmp_path, agents)
        r = router(cfg, await prepare_exec(cfg))
        locked = r.get("locked")
        assert "exec" not in locked.tools and locked.settings.exec is None
        assert "## Sandbox" not in prompt(r, "locked")
        assert "exec" in r.get("main").tools

    async def test_sandbox_none_warns_at_every_start(self, tmp_path: Path) -> None:
        cfg = config(tmp_path, sandbox="none")
        for _ in range(2):
            with capture_logs() as logs:
                runtime = await prepare_exec(cfg)
            assert runtime is not None and runtime.available
            assert [e["log_level"] for e in logs if e["event"] == "exec.no_sandbox"] == ["warning"]
        assert "directly on the host" in prompt(router(cfg, runtime))


async def test_a_missing_sandbox_is_not_offered_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    cfg = config(tmp_path)
    with capture_logs() as logs:
        runtime = await prepare_exec(cfg)
    assert runtime is not None and not runtime.available
    (event,) = [e for e in logs if e["event"] == "exec.unavailable"]
    assert event["log_level"] == "error" and "'bwrap' not found" in event["reason"]
    r = router(cfg, runtime)
    assert "exec" not in r.get("main").tools
    text = prompt(r)
    assert "## Sandbox" not in text and "- exec:" not in text


async def test_docker_without_a_daemon_is_not_offered(tmp_path: Path) -> None:
    cfg = config(tmp_path, sandbox="docker")
    runtime = await prepare_exec(cfg)
    assert runtime is not None
    if runtime.available:
        pytest.skip("a Docker daemon runs here")
    assert "exec" not in router(cfg, runtime).get("main").tools


class TestWhatTheModelIsOffered:
    async def names(self, tmp_path: Path, llm: FakeLLM) -> list[str]:
        cfg = make_config(tmp_path, llm, tools={"exec": {"enabled": True}})
        async with Loopgate(cfg) as app:
            await ChatDriver(app, ChatRef("web", "dm", ChatType.DIRECT)).ask("hi")
        return [t["function"]["name"] for t in llm.chat_requests[0].json.get("tools", [])]

    @needs_bwrap
    async def test_exec_when_the_sandbox_works(self, tmp_path: Path, llm: FakeLLM) -> None:
        assert "exec" in await self.names(tmp_path, llm)

    async def test_no_exec_when_it_is_missing(
        self, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))
        names = await self.names(tmp_path, llm)
        assert "exec" not in names and "read_file" in names
