"""What the fake OpenAI-compatible model says next: the items a ``FakeLLM`` script is made of.

Each item answers one chat-completion request, in order. :func:`text` and :func:`tool_calls`
(built from :func:`call`) are successful answers, :func:`echo` is what an empty script answers,
:func:`error` is an HTTP error status and :func:`stream_error` an error inside a 200 response;
:func:`delay` holds any of them back. An item only says what the answer is; how it goes on the
wire (SSE chunks or one JSON body) is up to :class:`tests.fakes.llm_server.FakeLLM`, and
:mod:`tests.fakes.llm_server` re-exports everything here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "ErrorReply",
    "FakeCall",
    "Reply",
    "ScriptItem",
    "call",
    "delay",
    "echo",
    "error",
    "stream_error",
    "text",
    "tool_calls",
]


@dataclass(frozen=True)
class FakeCall:
    """One tool call the fake model makes; ``id`` defaults to ``call_<n>``."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful answer: text chunks and/or tool calls, optionally with reasoning."""

    chunks: tuple[str, ...] = ()
    tool_calls: tuple[FakeCall, ...] = ()
    reasoning: tuple[str, ...] = ()
    reasoning_field: str = "reasoning_content"
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens)
    cached_tokens: int = 0  # of the prompt tokens, reported as read from the prompt cache
    echo: bool = False  # answer "echo: <last user message>" instead of ``chunks``
    interleave: bool = False  # stream argument fragments of parallel calls round-robin
    cut_off: bool = False  # stream ends without finish_reason and without [DONE]
    delay: float = 0.0
    pace: float = 0.0  # seconds between two streamed chunks (a model that writes slowly)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error status (``in_stream=False``) or an error event inside a 200 SSE stream."""

    status: int
    message: str
    retry_after: float | str | None = None
    in_stream: bool = False
    delay: float = 0.0


ScriptItem = Reply | ErrorReply


def text(
    *chunks: str,
    reasoning: str | tuple[str, ...] = (),
    reasoning_field: str = "reasoning_content",
    usage: tuple[int, int] | None = None,
    cut_off: bool = False,
    pace: float = 0.0,
    cached_tokens: int = 0,
) -> Reply:
    """A text answer; each positional argument is one streamed chunk (joined when not streaming),
    ``pace`` seconds apart."""
    thinking = (reasoning,) if isinstance(reasoning, str) else reasoning
    return Reply(
        chunks=chunks,
        reasoning=thinking,
        reasoning_field=reasoning_field,
        usage=usage,
        cut_off=cut_off,
        pace=pace,
        cached_tokens=cached_tokens,
    )


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> FakeCall:
    """A tool call; ``arguments`` as a dict (serialized) or raw text (may be invalid JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return FakeCall(name=name, arguments=raw, id=id)


def tool_calls(
    *calls: FakeCall,
    content: str = "",
    interleave: bool = False,
    usage: tuple[int, int] | None = None,
    cached_tokens: int = 0,
) -> Reply:
    """An answer with (parallel) tool calls, optionally preceded by some text."""
    return Reply(
        chunks=(content,) if content else (),
        tool_calls=calls,
        interleave=interleave,
        usage=usage,
        cached_tokens=cached_tokens,
    )


def echo() -> Reply:
    """The default answer: ``echo: <last user message>``."""
    return Reply(echo=True)


def error(
    status: int, message: str | None = None, *, retry_after: float | str | None = None
) -> ErrorReply:
    """An HTTP error with an OpenAI-style ``{"error": {"message": ...}}`` body."""
    return ErrorReply(
        status=status, message=message or _default_error_message(status), retry_after=retry_after
    )


def stream_error(
    message: str = "The server had an error while processing your request.",
) -> ErrorReply:
    """A 200 response whose SSE stream (or JSON body) carries an ``error`` object."""
    return ErrorReply(status=200, message=message, in_stream=True)


def delay(seconds: float, then: ScriptItem | None = None) -> ScriptItem:
    """Wait ``seconds`` before answering with ``then`` (default: the echo answer)."""
    return replace(then if then is not None else echo(), delay=seconds)


def _default_error_message(status: int) -> str:
    if status == 429:
        return "Rate limit reached for requests"
    if status >= 500:
        return "The server had an error while processing your request."
    return f"Request failed with status {status}"
