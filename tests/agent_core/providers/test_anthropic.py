"""AnthropicProvider against a real-HTTP fake of the Messages API (no httpx mocks)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agent_core import (
    AgentSettings,
    Event,
    EventBus,
    EventType,
    Loop,
    MemoryStore,
    RunRequest,
    RunStatus,
    Tool,
    ToolRegistry,
)
from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from agent_core.messages import ImagePart, Message, ToolCall
from agent_core.providers import AnthropicProvider, ModelRequest, Provider, ToolSpec
from agent_core.retry import RetryPolicy
from tests import provider_support
from tests.fakes.anthropic_server import (
    FakeAnthropic,
    error,
    message,
    stall,
    stream_error,
    text,
    tool_use,
)
from tests.provider_support import Collector

KEY = "sk-ant-test-abcdef0123456789"


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


@pytest.fixture
async def provider(api: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api.base_url, KEY)
    yield p
    await p.aclose()


def ask(content: str = "hi", *, stream: bool = True, **kw: object) -> ModelRequest:
    return provider_support.ask(content, model="claude-test", stream=stream, **kw)


class TestWireFormat:
    async def test_request_shape_and_headers(
        self, api: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        assert isinstance(provider, Provider) and KEY not in repr(provider)
        tools = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})]
        await provider.complete(ask("hello", tools=tools, temperature=0.2), Collector())
        sent = api.requests[0]
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == KEY
        assert sent.headers["anthropic-version"] == "2023-06-01"
        body = sent.json
        assert body["system"] == "be brief"
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "hello"}]}
        ]
        assert body["tools"][0]["input_schema"] == {"type": "object", "properties": {}}
        assert body["max_tokens"] == 4096 and body["stream"] is True and body["temperature"] == 0.2

    async def test_base_url_with_v1_suffix_works(self, api: FakeAnthropic) -> None:
        p = AnthropicProvider(api.base_url + "/v1/", KEY)
        try:
            response = await p.complete(ask("x", stream=False))
        finally:
            await p.aclose()
        assert response.content == "echo: x"

    async def test_passed_in_session_is_not_closed(self, api: FakeAnthropic) -> None:
        async with aiohttp.ClientSession() as session:
            p = AnthropicProvider(api.base_url, KEY, session=session)
            await p.complete(ask(stream=False))
            await p.aclose()
            assert not session.closed

        own = AnthropicProvider(api.base_url, KEY)
        await own.complete(ask())  # its own session is made on first use, in the running loop
        await own.aclose()
        assert own._endpoint._session is not None and own._endpoint._session.closed

    async def test_tool_results_are_merged_into_one_user_message(
        self, api: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        c1 = ToolCall("toolu_a", "read_file", '{"path": "a"}')
        c2 = ToolCall("toolu_b", "read_file", "{broken")
        history = [
            Message.system("sys"),
            Message.user("read both"),
            Message.assistant("Reading.", tool_calls=(c1, c2)),
            Message.tool(c1, "A"),
            Message.tool(c2, "Error: invalid arguments"),
        ]
        await provider.complete(ModelRequest(model="m", messages=history, stream=False))
        wire = api.requests[0].json["messages"]
        assert [m["role"] for m in wire] == ["user", "assistant", "user"]
        assert wire[1]["content"] == [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}},
        ]
        assert [b["tool_use_id"] for b in wire[2]["content"]] == ["toolu_a", "toolu_b"]

    async def test_an_image_goes_as_a_base64_image_block_before_the_text(
        self, api: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        photo = ImagePart("a.png", "inbox/a.png", 4, 3, "image/png", b"\x89PNG")
        messages = [Message.system("sys"), Message.user("and this?", (photo,))]
        await provider.complete(ModelRequest(model="m", messages=messages, stream=False))
        assert api.requests[0].json["messages"] == [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="},
                    },
                    {"type": "text", "text": "and this?"},
                ],
            }
        ]


class TestResponses:
    @pytest.mark.parametrize("stream", [True, False])
    async def test_text_with_thinking(
        self, api: FakeAnthropic, provider: AnthropicProvider, stream: bool
    ) -> None:
        api.script(message(text("Hel", "lo"), thinking=("hmm ", "ok"), usage=(30, 9)))
        collector = Collector()
        response = await provider.complete(ask(stream=stream), collector)
        assert response.content == "Hello"
        assert response.thinking == "hmm ok"
        assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)
        assert response.finish_reason == "end_turn"
        if stream:
            assert collector.of("text") == ["Hel", "lo"]
            assert collector.of("thinking") == ["hmm ", "ok"]
        else:
            assert collector.deltas == []

    @pytest.mark.parametrize("stream", [True, False])
    async def test_parallel_tool_use(
        self, api: FakeAnthropic, provider: AnthropicProvider, stream: bool
    ) -> None:
        api.script(
            message(
                text("Let me look."),
                tool_use("read_file", {"path": "a/b.txt", "n": 1}),
                tool_use("list_files", {}),
            )
        )
        response = await provider.complete(ask(stream=stream))
        assert response.content == "Let me look."
        assert response.finish_reason == "tool_use"
        assert [c.name for c in response.tool_calls] == ["read_file", "list_files"]
        assert json.loads(response.tool_calls[0].arguments) == {"path": "a/b.txt", "n": 1}
        assert response.tool_calls[1].parsed_arguments() == {}
        assert all(c.id.startswith("toolu_") for c in response.tool_calls)

    async def test_thinking_blocks_are_sent_back_with_their_tool_turn(
        self, api: FakeAnthropic, api_key: str = KEY
    ) -> None:
        p = AnthropicProvider(api.base_url, api_key, thinking_budget=2048)
        try:
            api.script(message(tool_use("list_files"), thinking="plan"), message(text("done")))
            first = await p.complete(ask())
            call = first.tool_calls[0]
            history = [
                Message.user("hi"),
                Message.assistant("", tool_calls=(call,)),
                Message.tool(call, "[]"),
            ]
            await p.complete(ModelRequest(model="m", messages=history))
        finally:
            await p.aclose()
        assert api.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assistant = api.requests[1].json["messages"][1]
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "plan",
            "signature": "sig-1",
        }
        assert assistant["content"][1]["type"] == "tool_use"


class TestErrors:
    async def test_429_carries_retry_after(
        self, api: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        api.script(error(429, retry_after=7))
        with pytest.raises(RateLimited) as info:
            await provider.complete(ask())
        assert info.value.retry_after == 7 and info.value.transient

    @pytest.mark.parametrize("status", [500, 529])
    async def test_5xx_is_transient(
        self, api: FakeAnthropic, provider: AnthropicProvider, status: int
    ) -> None:
        api.script(error(status, "busy"))
        with pytest.raises(ProviderUnavailable, match="busy") as info:
            await provider.complete(ask())
        assert info.value.status_code == status

    async def test_bad_key_is_not_transient_and_redacted(self, api: FakeAnthropic) -> None:
        p = AnthropicProvider(api.base_url, "wrong-key")
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete(ask())
        finally:
            await p.aclose()
        assert info.value.status_code == 401 and not info.value.transient

    async def test_error_event_inside_the_stream(
        self, api: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        api.script(stream_error("Overloaded"))
        with pytest.raises(ProviderUnavailable, match="Overloaded"):
            await provider.complete(ask())

    async def test_stalled_stream_times_out(self, api: FakeAnthropic) -> None:
        p = AnthropicProvider(api.base_url, KEY, timeout=0.3)
        api.script(stall(text("never")))
        try:
            with pytest.raises(ProviderTimeout):
                await p.complete(ask())
        finally:
            await p.aclose()

    async def test_connection_refused(self) -> None:
        p = AnthropicProvider("http://127.0.0.1:9", KEY)
        try:
            with pytest.raises(ProviderUnavailable):
                await p.complete(ask())
        finally:
            await p.aclose()


class TestThroughTheLoop:
    """The whole run with the real Anthropic provider code: tools, thinking, retries."""

    async def test_tool_run_with_thinking_and_a_retry(
        self, api: FakeAnthropic, tmp_path: Path
    ) -> None:
        async def lookup(args: dict[str, object], ctx: object) -> str:
            return f"value of {args['key']}"

        tools = ToolRegistry.of([Tool("lookup", "l", {"type": "object"}, lookup, read_only=True)])
        bus = EventBus()
        events: list[Event] = []

        async def record(event: Event) -> None:
            events.append(event)

        bus.subscribe(record)
        store = MemoryStore()
        provider = AnthropicProvider(api.base_url, KEY)
        loop = Loop(
            AgentSettings(id="main", model="claude-test", workspace=tmp_path, provider="anthropic"),
            provider,
            tools,
            store,
            store,
            bus,
            retry=RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.01),
        )
        api.script(
            error(429, retry_after=0),
            message(text("Checking."), tool_use("lookup", {"key": "x"}), thinking="need x"),
            message(text("x is 1"), usage=(40, 3)),
        )
        try:
            result = await loop.run(RunRequest(session_key="s", message="what is x?", user_id="u"))
        finally:
            await provider.aclose()
        assert result.status is RunStatus.COMPLETED and result.content == "x is 1"
        # (12+7 for the tool turn) + (40+3 for the answer); the 429 costs nothing.
        assert (result.usage.input_tokens, result.usage.output_tokens) == (52, 10)
        types = [e.type for e in events]
        assert EventType.RUN_RETRYING in types
        assert [e.payload["content"] for e in events if e.type is EventType.THINKING] == ["need x"]
        assert [e.payload["content"] for e in events if e.type is EventType.BLOCK_REPLY] == [
            "Checking."
        ]
        assert "need x" not in result.content
        tool_result = api.requests[-1].json["messages"][-1]["content"][0]
        assert tool_result["type"] == "tool_result" and tool_result["content"] == "value of x"


def test_cache_reads_count_as_input_and_as_cached_input() -> None:
    from agent_core.providers._anthropic import parse_usage

    usage = parse_usage(
        {
            "input_tokens": 100,
            "cache_creation_input_tokens": 50,
            "cache_read_input_tokens": 800,
            "output_tokens": 30,
        }
    )
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (950, 800, 30)
    assert usage.cache_write_tokens == 50  # input too, priced apart (bot/usage/pricing.py)
