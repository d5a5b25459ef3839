"""OpenAICompatProvider against a real HTTP fake server (no httpx mocks): what a working
server gets and gives back (streamed and whole answers, tool calls, reasoning, the wire format).

Failures (HTTP errors, timeouts, broken streams) are in ``test_openai_compat_errors.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import httpx
import pytest

from agent_core.messages import ImagePart, Message, ToolCall, Usage
from agent_core.providers import Delta, ModelRequest, OpenAICompatProvider, Provider, ToolSpec
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.provider_support import API_KEY, Collector, ask


@pytest.fixture
async def provider(llm: FakeLLM) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider(llm.base_url + "/", API_KEY)
    yield p
    await p.aclose()


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


@pytest.mark.parametrize("stream", [True, False])
async def test_cached_prompt_tokens_are_read_from_the_details(
    llm: FakeLLM, provider: OpenAICompatProvider, stream: bool
) -> None:
    llm.script(text("ok", usage=(1000, 20), cached_tokens=640))

    response = await provider.complete(ask(stream=stream))

    assert response.usage == Usage(1000, 20, cached_input_tokens=640)


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


async def test_passed_in_session_is_not_closed(llm: FakeLLM) -> None:
    async with aiohttp.ClientSession() as session:
        provider = OpenAICompatProvider(llm.base_url, session=session)
        await provider.complete(ask())
        await provider.aclose()
        assert not session.closed

    own = OpenAICompatProvider(llm.base_url)
    await own.complete(ask())  # its own session is made on first use, in the running loop
    await own.aclose()
    assert own._endpoint._session is not None and own._endpoint._session.closed


async def test_an_image_goes_as_an_image_url_part_after_the_text(
    llm: FakeLLM, provider: OpenAICompatProvider
) -> None:
    photo = ImagePart("cat.jpg", "inbox/cat.jpg", 4, 3, "image/jpeg", b"\xff\xd8\xff")
    messages = [Message.system("sys"), Message.user("what is this?", (photo,))]

    await provider.complete(ModelRequest(model="gpt-test", messages=messages, stream=False))

    assert llm.last_request.json["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
        ],
    }
