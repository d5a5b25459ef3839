"""Test doubles for code that uses the agent core (pure unit tests, benchmarks).

Provider behaviour over real HTTP is tested against the fake server in ``tests/fakes``; this
scripted provider is for testing the loop's own logic without a network.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from typing import Any

from agent_core.messages import ToolCall, Usage
from agent_core.providers.base import Delta, DeltaHandler, ModelRequest, ModelResponse

_ids = itertools.count(1)


class UnexpectedModelCall(AssertionError):
    """The loop called the model more times than the test scripted."""


def reply(text: str, *, input_tokens: int = 10, output_tokens: int = 5) -> ModelResponse:
    return ModelResponse(
        content=text, usage=Usage(input_tokens, output_tokens), finish_reason="stop"
    )


def call(name: str, arguments: dict[str, Any] | str | None = None) -> ToolCall:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=args)


def tool_calls(*calls: ToolCall, text: str = "") -> ModelResponse:
    return ModelResponse(
        content=text, tool_calls=list(calls), usage=Usage(10, 5), finish_reason="tool_calls"
    )


class ScriptedProvider:
    """Answers from a script of responses, exceptions, or ``None`` for an echo of the input."""

    name = "scripted"

    def __init__(self, *script: ModelResponse | BaseException, delay: float = 0.0) -> None:
        self.script: deque[ModelResponse | BaseException] = deque(script)
        self.requests: list[ModelRequest] = []
        self.delay = delay
        self.echo = not script

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.echo:
            last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            item: ModelResponse | BaseException = reply(f"echo: {last}")
        elif not self.script:
            raise UnexpectedModelCall(f"call #{len(self.requests)} was not scripted")
        else:
            item = self.script.popleft()
        if isinstance(item, BaseException):
            raise item
        if on_delta is not None and request.stream and item.content:
            await on_delta(Delta("text", item.content))
        return item

    def assert_complete(self) -> None:
        if self.script:
            raise AssertionError(f"{len(self.script)} scripted responses were never used")

    async def aclose(self) -> None:
        return None
