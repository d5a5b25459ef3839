"""Conversation messages as the agent core stores them and sends them to providers."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; may be invalid

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError with a model-readable reason."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg} at char {exc.pos}") from exc
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image a user sent, as the model sees it.

    ``path`` is where the original was saved in the user's workspace: history and traces keep
    only that reference (see :meth:`note`), never the bytes. ``data`` is the picture re-encoded
    for the model (PNG or JPEG, ``mime``); it lives only in the run's memory.
    """

    name: str
    path: str
    width: int
    height: int
    mime: str = "image/jpeg"
    data: bytes = field(default=b"", repr=False, compare=False)

    def note(self) -> str:
        return f"[image: {self.name}, {self.width}×{self.height}, saved to {self.path}]"

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.base64()}"

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # tool name on tool results
    images: tuple[ImagePart, ...] = ()
    """Images of a user message; providers send them as image parts after the text."""

    def with_image_notes(self) -> Message:
        """This message with each image replaced by its text note: what history keeps."""
        if not self.images:
            return self
        notes = "\n".join(image.note() for image in self.images)
        content = f"{self.content}\n{notes}" if self.content else notes
        return Message(self.role, content, self.tool_calls, self.tool_call_id, self.name)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str, images: tuple[ImagePart, ...] = ()) -> Message:
        return cls("user", content, images=images)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls("assistant", content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, call: ToolCall, content: str) -> Message:
        return cls("tool", content, tool_call_id=call.id, name=call.name)


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    """Every input token, cached ones included."""
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """The part of ``input_tokens`` read from the provider's prompt cache (billed lower)."""
    cache_write_tokens: int = 0
    """The part of ``input_tokens`` written to the provider's prompt cache (Anthropic's
    ``cache_creation_input_tokens``: billed higher than plain input)."""

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.cache_write_tokens += other.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(slots=True)
class SessionHistory:
    """What a session store returns: the summary of compacted turns plus the kept messages."""

    messages: list[Message] = field(default_factory=list)
    summary: str | None = None
