"""OpenAICompatProvider against a real HTTP fake server (no httpx mocks)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator
from email.utils import formatdate

import httpx
import pytest
from structlog.testing import capture_logs

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from agent_core.messages import Message, ToolCall, Usage
from agent_core.providers import Delta, ModelRequest, OpenAICompatProvider, Provider, ToolSpec
from agent_core.providers.openai_compat import parse_retry_after
from tests.fakes.llm_server import (
    FakeLLM,
    call,
    delay,
    error,
    stream_error,
    text,
    tool_calls,
)

API_KEY = "sk-test-0123456789abcdef"


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
async def provider(llm: FakeLLM) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider(llm.base_url + "/", API_KEY)
    yield p
    await p.aclose()


def ask(content: str = "hi", *, stream: bool = True, **kwargs: object) -> ModelRequest:
    return ModelRequest(
        model="gpt-test",
        messages=[Message.system("be brief"), Message.user(content)],
        stream=stream,
        **kwargs,  # type: ignore[arg-type]
    )


class Collector:
    def __init__(self) -> None:
        self.deltas: list[Delta] = []

    async def __call__(self, delta: Delta) -> None:
        self.deltas.append(delta)

    def of(self, kind: str) -> list[str]:
        return [d.content for d in self.deltas if d.kind == kind]


# -- success paths ---------------------------------------------------------------------------


async def test_is_a_provider(provider: OpenAICompatProvider) -> None:
    assert isinstance(provider, Provider)
    assert provider.name == "openai"
    assert API_KEY not in repr(provider)


async def test_non_streaming_text(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(text("Hello", " there", usage=(11, 2)))
    collector = Collector()

    response = await provider.complete(ask(stream=False), collector)

    assert response.content == "Hello there"
    assert response.finish_reason == "stop"
    assert response.tool_calls == []
    assert response.usage == Usage(11, 2)
    assert collector.deltas == []  # not streaming: no deltas
    body = llm.last_request.json
    assert llm.last_request.path == "/v1/chat/completions"  # trailing slash of base_url stripped
    assert body["model"] == "gpt-test"
    assert "stream" not in body and "stream_options" not in body
    assert "tools" not in body and "temperature" not in body and "max_tokens" not in body


async def test_streaming_text_chunks_in_order(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(text("Hel", "lo, ", "wor", "ld"))
    collector = Collector()

    response = await provider.complete(ask(), collector)

    assert collector.deltas == [
        Delta("text", "Hel"),
        Delta("text", "lo, "),
        Delta("text", "wor"),
        Delta("text", "ld"),
    ]
    assert response.content == "Hello, world"
    assert response.finish_reason == "stop"
    body = llm.last_request.json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert llm.last_request.headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
async def test_streamed_parallel_tool_calls_assembled(
    llm: FakeLLM, provider: OpenAICompatProvider, interleave: bool
) -> None:
    llm.script(
        tool_calls(
            call("read_file", {"path": "notes/a very long file name.txt", "max_lines": 200}),
            call("list_dir", {"path": "src/agent_core/providers"}, id="call_custom"),
            content="Let me look.",
            interleave=interleave,
        )
    )
    collector = Collector()

    response = await provider.complete(ask(), collector)

    assert response.finish_reason == "tool_calls"
    assert response.content == "Let me look."
    assert collector.of("text") == ["Let me look."]
    assert [(c.id, c.name) for c in response.tool_calls] == [
        ("call_1", "read_file"),
        ("call_custom", "list_dir"),
    ]
    assert response.tool_calls[0].parsed_arguments() == {
        "path": "notes/a very long file name.txt",
        "max_lines": 200,
    }
    assert response.tool_calls[1].parsed_arguments() == {"path": "src/agent_core/providers"}


async def test_non_streaming_tool_calls(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(tool_calls(call("read_file", {"path": "a.txt"}, id="c1")))

    response = await provider.complete(ask(stream=False))

    assert response.tool_calls == [ToolCall("c1", "read_file", '{"path": "a.txt"}')]
    assert response.content == ""
    assert response.finish_reason == "tool_calls"


async def test_streamed_usage_from_final_chunk(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    llm.script(text("ok", usage=(1234, 56)))

    response = await provider.complete(ask())

    assert response.usage == Usage(input_tokens=1234, output_tokens=56)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_goes_to_thinking_not_content(
    llm: FakeLLM, provider: OpenAICompatProvider, field: str
) -> None:
    llm.script(text("42", reasoning=("Let me ", "think."), reasoning_field=field))
    collector = Collector()

    response = await provider.complete(ask(), collector)

    assert collector.deltas == [
        Delta("thinking", "Let me "),
        Delta("thinking", "think."),
        Delta("text", "42"),
    ]
    assert response.thinking == "Let me think."
    assert response.content == "42"


async def test_non_streaming_reasoning(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(text("42", reasoning="Because.", reasoning_field="reasoning"))

    response = await provider.complete(ask(stream=False))

    assert (response.content, response.thinking) == ("42", "Because.")


async def test_wire_format_of_history_with_tool_calls(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    first = ToolCall("call_a", "read_file", '{"path": "a.txt"}')
    second = ToolCall("call_b", "list_dir", "")
    tool = ToolSpec(
        name="read_file",
        description="Read a file.",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    request = ModelRequest(
        model="gpt-test",
        messages=[
            Message.system("sys"),
            Message.user("read a.txt"),
            Message.assistant("", (first, second)),
            Message.tool(first, "contents of a"),
            Message.tool(second, "a.txt b.txt"),
            Message.assistant("Done: contents of a"),
            Message.user("thanks"),
        ],
        tools=[tool],
        stream=False,
        temperature=0.2,
        max_tokens=256,
    )

    await provider.complete(request)

    body = llm.last_request.json
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "list_dir", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "a.txt b.txt"},
        {"role": "assistant", "content": "Done: contents of a"},
        {"role": "user", "content": "thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 256


async def test_no_authorization_header_without_key(llm: FakeLLM) -> None:
    provider = OpenAICompatProvider(llm.base_url, extra_headers={"X-Title": "loopgate"})
    try:
        await provider.complete(ask(stream=False))
    finally:
        await provider.aclose()

    headers = llm.last_request.headers
    assert "authorization" not in headers
    assert headers["x-title"] == "loopgate"


async def test_bearer_header_with_key(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    await provider.complete(ask())

    assert llm.last_request.headers["authorization"] == f"Bearer {API_KEY}"


async def test_default_echo_reply_and_models_endpoint(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    response = await provider.complete(ask("ping"))
    assert response.content == "echo: ping"

    async with httpx.AsyncClient() as client:
        models = (await client.get(f"{llm.base_url}/models")).json()
    assert [m["id"] for m in models["data"]] == ["fake-model"]
    assert [r.path for r in llm.requests] == ["/v1/chat/completions", "/v1/models"]


async def test_passed_in_client_is_not_closed(llm: FakeLLM) -> None:
    async with httpx.AsyncClient() as client:
        provider = OpenAICompatProvider(llm.base_url, client=client)
        await provider.complete(ask())
        await provider.aclose()
        assert not client.is_closed

    own = OpenAICompatProvider(llm.base_url)
    await own.aclose()
    assert own._client.is_closed


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_429_with_retry_after_seconds(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    llm.script(error(429, "Slow down", retry_after=7))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask(stream=stream))

    assert info.value.retry_after == 7.0
    assert info.value.status_code == 429
    assert info.value.transient
    assert "Slow down" in str(info.value)


async def test_429_with_retry_after_http_date(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(429, retry_after=formatdate(time.time() + 30, usegmt=True)))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask())

    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31


async def test_429_without_retry_after(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(429))

    with pytest.raises(RateLimited) as info:
        await provider.complete(ask())

    assert info.value.retry_after is None


@pytest.mark.parametrize("stream", [True, False])
async def test_500_is_unavailable(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    llm.script(error(503, "overloaded"))

    with pytest.raises(ProviderUnavailable) as info:
        await provider.complete(ask(stream=stream))

    assert info.value.status_code == 503
    assert info.value.transient
    assert "overloaded" in str(info.value)


@pytest.mark.parametrize("stream", [True, False])
async def test_400_is_provider_error_with_message_and_no_key(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    # A server that echoes the key back in its error must not leak it through us.
    llm.script(error(400, f"Invalid model 'gpt-x' for key {API_KEY}"))

    with capture_logs() as logs, pytest.raises(ProviderError) as info:
        await provider.complete(ask(stream=stream))

    assert type(info.value) is ProviderError
    assert info.value.status_code == 400
    assert not info.value.transient
    assert "Invalid model 'gpt-x' for key" in str(info.value)
    assert API_KEY not in str(info.value)
    assert any(entry["event"] == "provider.error" for entry in logs)
    assert API_KEY not in json.dumps(logs, default=str)


async def test_read_timeout(llm: FakeLLM) -> None:
    llm.script(delay(5.0, text("too late")))
    provider = OpenAICompatProvider(llm.base_url, timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as info:
            await provider.complete(ask())
    finally:
        await provider.aclose()

    assert time.monotonic() - started < 3
    assert info.value.transient
    assert isinstance(info.value.__cause__, httpx.TimeoutException)


async def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nobody listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", API_KEY)
    try:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.complete(ask())
    finally:
        await provider.aclose()

    assert info.value.transient
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert API_KEY not in str(info.value)


async def test_stream_cut_off_is_unavailable(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(text("partial answ", cut_off=True))
    collector = Collector()

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask(), collector)

    assert collector.of("text") == ["partial answ"]


async def test_error_event_in_stream(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(stream_error("model crashed"))

    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())

    assert type(info.value) is ProviderError
    assert "model crashed" in str(info.value)


async def test_delta_handler_errors_are_not_translated(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    # A channel failing to edit its message (itself over httpx) is not a provider outage.
    async def failing(delta: Delta) -> None:
        raise httpx.ConnectError("telegram is down")

    with pytest.raises(httpx.ConnectError, match="telegram is down"):
        await provider.complete(ask(), failing)


async def test_no_retry_inside_provider(llm: FakeLLM, provider: OpenAICompatProvider) -> None:
    llm.script(error(500), text("second"))

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask())

    assert len(llm.chat_requests) == 1
    assert llm.remaining == 1


def test_parse_retry_after_variants() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert parse_retry_after(httpx.Headers({"Retry-After": "Mon, 01 Jan 2001 00:00:00 GMT"})) == 0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers()) is None


async def test_wrong_key_is_401_provider_error() -> None:
    async with FakeLLM(api_key="sk-right") as server:
        wrong = OpenAICompatProvider(server.base_url, "sk-wrong")
        right = OpenAICompatProvider(server.base_url, "sk-right")
        try:
            with pytest.raises(ProviderError) as info:
                await wrong.complete(ask())
            assert info.value.status_code == 401
            assert (await right.complete(ask("ok"))).content == "echo: ok"
        finally:
            await wrong.aclose()
            await right.aclose()
