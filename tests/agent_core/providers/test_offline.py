"""The provider used without an LLM: an honest reply saying how to configure one."""

from __future__ import annotations

import pytest

from agent_core.messages import Usage
from agent_core.providers import Provider
from agent_core.providers._offline import OFFLINE_REPLY, OfflineProvider
from agent_core.providers.base import ModelRequest, ToolSpec
from tests.provider_support import Collector, ask


def test_is_a_provider_named_offline() -> None:
    provider = OfflineProvider()
    assert isinstance(provider, Provider)
    assert provider.name == "offline"


def test_the_reply_says_how_to_connect_a_model() -> None:
    assert "No LLM is configured" in OFFLINE_REPLY
    assert "OPENAI_API_KEY" in OFFLINE_REPLY and "providers.openai.base_url" in OFFLINE_REPLY


async def test_a_streamed_request_gets_the_reply_as_one_text_delta() -> None:
    deltas = Collector()
    response = await OfflineProvider().complete(ask("hello"), deltas)
    assert [(d.kind, d.content) for d in deltas.deltas] == [("text", OFFLINE_REPLY)]
    assert (response.content, response.finish_reason) == (OFFLINE_REPLY, "stop")
    assert response.tool_calls == [] and response.thinking == ""
    assert response.usage == Usage()


@pytest.mark.parametrize("stream", [False, True])
async def test_nothing_is_streamed_without_streaming_or_a_handler(stream: bool) -> None:
    deltas = Collector()
    handler = deltas if not stream else None
    response = await OfflineProvider().complete(ask(stream=stream), handler)
    assert deltas.deltas == []
    assert response.content == OFFLINE_REPLY


async def test_the_request_does_not_change_the_reply() -> None:
    tools = [ToolSpec("read", "Read a file.", {"type": "object"})]
    request = ModelRequest(model="any", messages=[], tools=tools, stream=False, max_tokens=1)
    response = await OfflineProvider().complete(request)
    assert response.content == OFFLINE_REPLY and response.tool_calls == []


async def test_closing_is_harmless_and_repeatable() -> None:
    provider = OfflineProvider()
    await provider.aclose()
    await provider.aclose()
    assert (await provider.complete(ask(stream=False))).content == OFFLINE_REPLY
