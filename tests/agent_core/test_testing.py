"""agent_core/testing.py: the scripted provider and the response builders other tests (and the
benchmarks) rely on; a double that misbehaves would make those tests prove nothing."""

from __future__ import annotations

import json
import time

import pytest

from agent_core.messages import Message
from agent_core.providers.base import Delta, ModelRequest
from agent_core.testing import ScriptedProvider, UnexpectedModelCall, call, reply, tool_calls


def ask(*texts: str, stream: bool = True) -> ModelRequest:
    return ModelRequest("m", [Message.system("sys"), *map(Message.user, texts)], stream=stream)


class Deltas:
    def __init__(self) -> None:
        self.seen: list[Delta] = []

    async def __call__(self, delta: Delta) -> None:
        self.seen.append(delta)


def test_builders() -> None:
    answer = reply("hi", input_tokens=3, output_tokens=2)
    assert (answer.content, answer.finish_reason) == ("hi", "stop")
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (3, 2)
    first, second = call("read_file", {"path": "a"}), call("list_files")
    assert first.id != second.id
    assert json.loads(first.arguments) == {"path": "a"} and second.arguments == "{}"
    assert call("x", "not json").arguments == "not json"  # raw text for bad-argument tests
    batch = tool_calls(first, second, text="looking")
    assert batch.tool_calls == [first, second]
    assert (batch.content, batch.finish_reason) == ("looking", "tool_calls")


async def test_script_is_played_in_order_and_requests_recorded() -> None:
    provider = ScriptedProvider(reply("one"), reply("two"))
    assert (await provider.complete(ask("a"))).content == "one"
    assert (await provider.complete(ask("b"))).content == "two"
    assert [r.messages[-1].content for r in provider.requests] == ["a", "b"]
    provider.assert_complete()


async def test_a_call_beyond_the_script_fails_loudly() -> None:
    provider = ScriptedProvider(reply("only one"))
    await provider.complete(ask("a"))
    with pytest.raises(UnexpectedModelCall, match="call #2"):
        await provider.complete(ask("b"))


def test_unused_script_fails_assert_complete() -> None:
    with pytest.raises(AssertionError, match="2 scripted responses were never used"):
        ScriptedProvider(reply("a"), reply("b")).assert_complete()


async def test_scripted_exceptions_are_raised_in_turn() -> None:
    provider = ScriptedProvider(ConnectionError("down"), reply("back"))
    with pytest.raises(ConnectionError, match="down"):
        await provider.complete(ask("a"))
    assert (await provider.complete(ask("a"))).content == "back"


async def test_without_a_script_it_echoes_the_last_user_message() -> None:
    provider = ScriptedProvider()
    request = ModelRequest(
        "m", [Message.user("first"), Message.user("last"), Message.assistant("after")]
    )
    assert (await provider.complete(request)).content == "echo: last"
    assert (await provider.complete(ModelRequest("m", [Message.system("s")]))).content == "echo: "
    provider.assert_complete()  # an echo has nothing left over


async def test_text_is_streamed_only_when_asked() -> None:
    provider = ScriptedProvider(reply("hello"), reply("quiet"), tool_calls(call("t")))
    deltas = Deltas()
    await provider.complete(ask("a"), deltas)
    await provider.complete(ask("b", stream=False), deltas)
    await provider.complete(ask("c"), deltas)  # no text: nothing streamed
    assert deltas.seen == [Delta("text", "hello")]


async def test_delay_holds_the_answer_back() -> None:
    provider = ScriptedProvider(reply("slow"), delay=0.05)
    started = time.monotonic()
    await provider.complete(ask("a"))
    assert time.monotonic() - started >= 0.05  # measures the provider's own sleep
