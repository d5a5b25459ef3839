"""The provider protocol: one LLM call, streamed or not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agent_core.messages import Message, ToolCall, Usage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it (JSON-schema parameters)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    stream: bool = True
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """A streamed fragment: answer text or reasoning text."""

    kind: Literal["text", "thinking"]
    content: str


DeltaHandler = Callable[[Delta], Awaitable[None]]


@dataclass(slots=True)
class ModelResponse:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    thinking: str = ""


@runtime_checkable
class Provider(Protocol):
    name: str

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        """Call the model once. Streams deltas to ``on_delta`` when given and streaming.

        Raises :class:`~agent_core.errors.ProviderError` subclasses and never retries: the loop
        owns retries (``agent_core/retry.py``) so every provider gets the same policy and events.
        """

    async def aclose(self) -> None: ...
