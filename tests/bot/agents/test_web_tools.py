"""``tools.web`` → the agents' web_fetch and web_search: offered by the switches, hidden per agent
by ``disabled_tools``, and one fetch through a whole run reaching the model wrapped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core import EventBus, MemoryStore, RunRequest, RunStatus
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from bot.agents.router import AgentRouter
from bot.agents.web_tools import build_web_tools
from bot.config import parse_config
from bot.config.web_tools import WebToolsConfig
from tests.fakes.web_server import FakeWeb
from tests.web_support import ARTICLE_HTML, FakeDNS


def make_router(
    tmp_path: Path, provider: ScriptedProvider | None = None, **sections: Any
) -> AgentRouter:
    data: dict[str, Any] = {"agents": {"defaults": {"workspace": str(tmp_path)}}, **sections}
    store = MemoryStore()
    return AgentRouter(
        parse_config(data, {}),
        store=store,
        traces=store,
        events=EventBus(),
        providers={"openai": provider or ScriptedProvider()},
        web_resolver=FakeDNS({"news.test": ["127.0.0.1"]}),
    )


class TestSwitches:
    async def test_fetch_on_and_no_search_by_default(self) -> None:
        web = build_web_tools(WebToolsConfig())
        assert [t.name for t in web.tools] == ["web_fetch"]
        assert all(t.read_only for t in web.tools)
        await web.aclose()

    async def test_a_search_provider_adds_web_search(self) -> None:
        config = WebToolsConfig.model_validate({"search": {"tavily": {"api_key": "t"}}})
        web = build_web_tools(config)
        assert [t.name for t in web.tools] == ["web_fetch", "web_search"]
        await web.aclose()

    async def test_both_off_builds_no_client(self) -> None:
        web = build_web_tools(WebToolsConfig.model_validate({"fetch": False}))
        assert web.tools == [] and web.client is None

    async def test_every_agent_gets_them_and_disabled_tools_hides_them(
        self, tmp_path: Path
    ) -> None:
        router = make_router(
            tmp_path,
            tools={"web": {"search": {"brave": {"api_key": "b"}}}},
            agents={
                "defaults": {"workspace": str(tmp_path)},
                "list": [{"id": "main"}, {"id": "quiet", "disabled_tools": ["web_fetch"]}],
            },
        )
        main, quiet = router.get("main"), router.get("quiet")
        assert {"web_fetch", "web_search"} <= set(main.tools.tools)
        assert "web_fetch" not in quiet.tools.tools and "web_search" in quiet.tools.tools
        assert "disabled_tools" in quiet.tools.hidden["web_fetch"]
        await router.aclose()

    async def test_fetch_false_leaves_web_fetch_out(self, tmp_path: Path) -> None:
        router = make_router(tmp_path, tools={"web": {"fetch": False}})
        assert "web_fetch" not in router.get("main").tools.tools
        await router.aclose()


async def test_a_run_fetches_a_page_and_the_model_reads_it_wrapped(tmp_path: Path) -> None:
    async with FakeWeb() as site:
        site.page("/article", ARTICLE_HTML)
        url = site.url("/article", "news.test")
        provider = ScriptedProvider(
            tool_calls(call("web_fetch", {"url": url})), reply("Lumen reached Mars.")
        )
        router = make_router(tmp_path, provider, tools={"web": {"allow_hosts": ["news.test"]}})
        result = await router.get("main").run(
            RunRequest(session_key="s1", message="what happened?", user_id="u1")
        )
        await router.aclose()
    assert result.status is RunStatus.COMPLETED and result.content == "Lumen reached Mars."
    seen = provider.requests[1].messages[-1]
    assert seen.role == "tool"
    assert seen.content.startswith(f'<external_content source="{url}">\n# Solar sail reaches')
    assert site.requests[0].host == f"news.test:{site.port}"
