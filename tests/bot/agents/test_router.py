"""AgentRouter: lazy resolution, TTL cache, invalidation, per-agent tools, provider wiring."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_core import Event, EventBus, EventType, MemoryStore, RunRequest, RunStatus, Tool
from agent_core.providers import AnthropicProvider, OpenAICompatProvider
from agent_core.retry import RetryPolicy
from bot.agents.router import AgentRouter, UnknownAgent
from bot.config import AgentConfig, parse_config
from tests.fakes.anthropic_server import FakeAnthropic, message, text
from tests.fakes.llm_server import FakeLLM, error


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_router(tmp_path: Path, clock: Clock | None = None, **config: Any) -> AgentRouter:
    data: dict[str, Any] = {"agents": {"defaults": {"workspace": str(tmp_path)}}}
    for key, value in config.items():
        data.setdefault(key, {}).update(value)
    store = MemoryStore()
    return AgentRouter(
        parse_config(data, {}),
        store=store,
        traces=store,
        events=EventBus(),
        clock=clock or Clock(),
        ttl=60,
    )


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return "custom"


class TestCache:
    def test_lazy_and_cached(self, tmp_path: Path) -> None:
        router = make_router(tmp_path)
        assert router.resolutions == 0
        first = router.get("main")
        assert router.get("main") is first and router.resolutions == 1

    def test_ttl_expiry_rebuilds(self, tmp_path: Path) -> None:
        clock = Clock()
        router = make_router(tmp_path, clock)
        first = router.get("main")
        clock.now += 59
        assert router.get("main") is first
        clock.now += 2
        assert router.get("main") is not first and router.resolutions == 2

    def test_invalidate_and_runtime_definition(self, tmp_path: Path) -> None:
        router = make_router(tmp_path)
        first = router.get("main")
        router.invalidate("main")
        second = router.get("main")
        assert second is not first
        router.define(AgentConfig(id="main", model="other-model", max_iterations=3))
        third = router.get("main")
        assert third is not second
        assert third.settings.model == "other-model" and third.settings.max_iterations == 3
        router.define(AgentConfig(id="helper"))
        assert "helper" in router.agent_ids and router.get("helper").settings.id == "helper"

    def test_unknown_agent_is_a_clear_error(self, tmp_path: Path) -> None:
        router = make_router(tmp_path)
        with pytest.raises(UnknownAgent, match=r"unknown agent 'ghost'.*main"):
            router.get("ghost")
        with pytest.raises(ValueError, match="unknown provider"):
            router.define(AgentConfig(id="x", provider="nope"))

    def test_each_agent_has_its_own_tool_registry(self, tmp_path: Path) -> None:
        router = make_router(tmp_path, agents={"list": [{"id": "support"}]})
        main = router.get("main")
        router.add_tool("support", Tool("ticket", "open a ticket", {"type": "object"}, _echo))
        support = router.get("support")
        assert "ticket" in support.tools and "ticket" not in main.tools
        assert "ticket" not in router.tools
        assert "read_file" in support.tools and support.tools is not main.tools
        support.tools.register(Tool("scratch", "s", {}, _echo))
        assert "scratch" not in router.get("main").tools


class TestProviders:
    def test_anthropic_kind_defaults_its_base_url(self, tmp_path: Path) -> None:
        router = make_router(
            tmp_path,
            providers={"claude": {"kind": "anthropic", "model": "claude-x", "api_key": "k"}},
            agents={"list": [{"id": "c", "provider": "claude", "fallback_provider": "openai"}]},
        )
        loop = router.get("c")
        assert isinstance(loop.provider, AnthropicProvider)
        assert "api.anthropic.com/v1/messages" in repr(loop.provider)
        assert loop.settings.model == "claude-x" and loop.settings.fallback_model == "gpt-4o-mini"

    def test_unknown_fallback_provider_fails_validation(self, tmp_path: Path) -> None:
        with pytest.raises(Exception, match=r"agents.list.0.fallback_provider: unknown provider"):
            make_router(tmp_path, agents={"list": [{"id": "a", "fallback_provider": "zzz"}]})


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_fallback_provider_answers_when_the_primary_keeps_failing(
    tmp_path: Path, llm: FakeLLM, claude: FakeAnthropic
) -> None:
    router = make_router(
        tmp_path,
        providers={
            "openai": {"base_url": llm.base_url, "model": "gpt-fake"},
            "claude": {"kind": "anthropic", "base_url": claude.base_url, "model": "claude-fake"},
        },
        agents={"list": [{"id": "main", "fallback_provider": "claude"}]},
    )
    events: list[Event] = []

    async def record(e: Event) -> None:
        events.append(e)

    router.events.subscribe(record)
    loop = router.get("main")
    assert isinstance(loop.provider, OpenAICompatProvider)
    loop.retry = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01)
    llm.script(error(500), error(503))
    claude.script(message(text("from ", "claude")))
    try:
        result = await loop.run(RunRequest(session_key="s", message="hi", user_id="u"))
    finally:
        await router.aclose()
    assert result.status is RunStatus.COMPLETED and result.content == "from claude"
    assert len(llm.chat_requests) == 2 and claude.requests[0].json["model"] == "claude-fake"
    retrying = [e.payload for e in events if e.type is EventType.RUN_RETRYING]
    assert [r["attempt"] for r in retrying] == [2]
    store = router.traces
    assert isinstance(store, MemoryStore)
    llm_spans = [s for s in store.traces[-1].spans if s.kind.value == "llm"]
    assert [(s.attributes["provider"], s.error) for s in llm_spans] == [
        ("openai", True),
        ("claude", False),
    ]
