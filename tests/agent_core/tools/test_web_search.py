"""web_search through each provider's API, faked on loopback: the request each one expects, the
results wrapped as external content, a 429 retried once after Retry-After."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_core.errors import ToolError
from agent_core.tools.web_client import WebClient
from agent_core.tools.web_search import search_provider, web_search_tool
from tests.fakes.search_server import FakeSearch
from tests.web_support import FakeDNS, guarded_client, tool_ctx


@pytest.fixture
async def api() -> AsyncIterator[FakeSearch]:
    async with FakeSearch() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[WebClient]:
    # No allow_hosts: the provider's own base_url host is open to the search tool by itself.
    client = guarded_client(FakeDNS({"search.lan": ["127.0.0.1"]}))
    yield client
    await client.aclose()


async def search(
    client: WebClient, provider: str, base_url: str, key: str = "k-123", **args: object
) -> str:
    tool = web_search_tool(search_provider(provider, client, base_url, key), default_count=2)
    return await tool.handler({"query": "solar sail", **args}, tool_ctx())


class TestProviders:
    async def test_brave(self, api: FakeSearch, client: WebClient) -> None:
        out = await search(client, "brave", api.base_url, "brave-key", count=3)
        (call,) = api.calls
        assert (call.method, call.path) == ("GET", "/res/v1/web/search")
        assert call.params == {"q": "solar sail", "count": "3"}
        assert call.headers["x-subscription-token"] == "brave-key"
        assert out.startswith('<external_content source="brave search" query="solar sail">\n')
        assert out.endswith("</external_content>")
        assert (
            "1. Solar sail - Wikipedia\nhttps://en.wikipedia.org/wiki/Solar_sail\n"
            "Solar sails use radiation pressure" in out
        )
        assert "<strong>" not in out and "3. IKAROS" in out

    async def test_tavily(self, api: FakeSearch, client: WebClient) -> None:
        out = await search(client, "tavily", api.base_url, "tvly-key")
        (call,) = api.calls
        assert (call.method, call.path) == ("POST", "/search")
        assert call.json == {"query": "solar sail", "max_results": 2}
        assert call.headers["authorization"] == "Bearer tvly-key"
        assert "2. How solar sails work\nhttps://www.planetary.org/sail" in out
        assert "3. " not in out

    async def test_searxng_on_the_lan_by_name(self, api: FakeSearch, client: WebClient) -> None:
        base = api.base_url.replace("127.0.0.1", "search.lan")
        out = await search(client, "searxng", base, "")
        (call,) = api.calls
        assert (call.method, call.path) == ("GET", "/search")
        assert call.params == {"q": "solar sail", "format": "json"}
        assert "authorization" not in call.headers
        assert call.headers["host"] == f"search.lan:{api.port}"
        assert "1. Solar sail - Wikipedia" in out and "3. " not in out  # count applied here

    async def test_the_provider_host_opens_nothing_for_web_fetch(self, client: WebClient) -> None:
        search_provider("searxng", client, "http://search.lan:8888", "")
        assert not client.guard.allow  # the fetch client's guard is unchanged

    async def test_no_results(self, api: FakeSearch, client: WebClient) -> None:
        api.results = []
        out = await search(client, "brave", api.base_url)
        assert "\n(no results)\n" in out


class TestFailures:
    async def test_a_429_is_retried_once_after_retry_after(
        self, api: FakeSearch, client: WebClient
    ) -> None:
        api.fail(429, retry_after="0")
        out = await search(client, "brave", api.base_url)
        assert len(api.calls) == 2 and "1. Solar sail - Wikipedia" in out

    async def test_a_second_429_is_a_tool_error_with_the_reason(
        self, api: FakeSearch, client: WebClient
    ) -> None:
        api.fail(429, times=2, retry_after="0")
        with pytest.raises(ToolError) as error:
            await search(client, "brave", api.base_url)
        assert str(error.value) == (
            "brave search failed: rate limited (429): Request rate limit exceeded for plan. "
            "(the provider asks to wait 0 s; try again later)"
        )
        assert len(api.calls) == 2

    async def test_a_long_retry_after_is_not_waited_for(
        self, api: FakeSearch, client: WebClient
    ) -> None:
        api.fail(429, retry_after="3600")
        with pytest.raises(ToolError, match="asks to wait 3600 s"):
            await search(client, "tavily", api.base_url)
        assert len(api.calls) == 1

    async def test_a_provider_error_is_a_tool_error_with_its_reason(
        self, api: FakeSearch, client: WebClient
    ) -> None:
        api.fail(401, body={"detail": "Invalid API key"})
        with pytest.raises(ToolError, match=r"^tavily search failed: HTTP 401: Invalid API key$"):
            await search(client, "tavily", api.base_url)
        assert len(api.calls) == 1  # a 4xx other than 429 is not retried

    async def test_a_5xx_is_retried_once(self, api: FakeSearch, client: WebClient) -> None:
        api.fail(503, times=2, retry_after="0", body={"message": "upstream down"})
        with pytest.raises(ToolError, match="searxng search failed: HTTP 503: upstream down"):
            await search(client, "searxng", api.base_url, "")
        assert len(api.calls) == 2

    @pytest.mark.parametrize("args", [{"query": ""}, {"query": "x", "count": 0}])
    async def test_bad_arguments(self, client: WebClient, args: dict[str, object]) -> None:
        tool = web_search_tool(search_provider("brave", client, "http://127.0.0.1:1", "k"))
        with pytest.raises(ToolError):
            await tool.handler(args, tool_ctx())


def test_web_search_is_read_only(client: WebClient) -> None:
    tool = web_search_tool(search_provider("brave", client, "https://api.search.brave.com", "k"))
    assert tool.name == "web_search" and tool.read_only
