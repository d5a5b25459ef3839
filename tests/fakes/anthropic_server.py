"""A real-HTTP fake of the Anthropic Messages API, for tests.

Same pattern as :mod:`tests.fakes.llm_server`: it listens on 127.0.0.1 (a free port) inside the
test's event loop and answers ``POST /v1/messages`` streamed (SSE with the real event sequence:
``message_start``, ``content_block_start/delta/stop``, ``message_delta``, ``message_stop``) or as
one JSON body. Tests script what the "model" says next::

    async with FakeAnthropic() as api:
        api.script(
            message(text("Hel", "lo"), thinking="let me think"),
            message(tool_use("read_file", {"path": "a.txt"})),
            error(429, retry_after=1),
            stall(text("never finished")),        # the stream stops mid-answer and hangs
        )
        provider = AnthropicProvider(api.base_url, "key")

When the script is empty the server answers ``echo: <last user text>``. Every request (JSON
body and headers) is recorded in ``api.requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.server import FakeServer

__all__ = [
    "FakeAnthropic",
    "Message",
    "error",
    "message",
    "stall",
    "stream_error",
    "text",
    "tool_use",
]

JSON_FRAGMENT = 9  # characters per streamed ``input_json_delta``


@dataclass(frozen=True)
class TextBlock:
    chunks: tuple[str, ...]


@dataclass(frozen=True)
class ToolUseBlock:
    name: str
    input: dict[str, Any]
    id: str | None = None
    raw_json: str | None = None  # stream this instead of json.dumps(input) (may be invalid)


Block = TextBlock | ToolUseBlock


@dataclass(frozen=True)
class Message:
    blocks: tuple[Block, ...] = ()
    thinking: tuple[str, ...] = ()
    usage: tuple[int, int] = (12, 7)  # (input_tokens, output_tokens)
    echo: bool = False
    stall: bool = False  # stream the first block's start, then hang until the server stops
    delay: float = 0.0

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUseBlock) for b in self.blocks) else "end_turn"


@dataclass(frozen=True)
class ErrorReply:
    status: int
    kind: str
    message: str
    retry_after: float | None = None
    in_stream: bool = False  # an SSE ``error`` event inside a 200 response


ScriptItem = Message | ErrorReply


def text(*chunks: str) -> TextBlock:
    return TextBlock(chunks)


def tool_use(
    name: str, input: dict[str, Any] | None = None, *, id: str | None = None, raw: str | None = None
) -> ToolUseBlock:
    return ToolUseBlock(name, input or {}, id, raw)


def message(
    *blocks: Block, thinking: str | tuple[str, ...] = (), usage: tuple[int, int] = (12, 7)
) -> Message:
    return Message(blocks, (thinking,) if isinstance(thinking, str) else thinking, usage)


def stall(*blocks: Block) -> Message:
    return Message(blocks or (text("…"),), stall=True)


def error(
    status: int, message: str | None = None, *, retry_after: float | None = None
) -> ErrorReply:
    kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return ErrorReply(status, kind, message or f"fake {kind}", retry_after)


def stream_error(message: str = "Overloaded") -> ErrorReply:
    return ErrorReply(200, "overloaded_error", message, in_stream=True)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    json: Any


@dataclass
class FakeAnthropic(FakeServer):
    name = "FakeAnthropic"
    graceful_shutdown = 2

    api_key: str | None = None  # when set, requests without ``x-api-key: <key>`` get 401
    requests: list[RecordedRequest] = field(default_factory=list)
    _queue: deque[ScriptItem] = field(default_factory=deque)
    _ids: int = 0

    def __post_init__(self) -> None:
        FakeServer.__init__(self)

    def script(self, *items: ScriptItem) -> None:
        self._queue.extend(items)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    def timeout_detail(self) -> str:
        return f"{len(self.requests)} requests"

    # -- handler ------------------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"{}")
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(RecordedRequest(request.url.path, headers, body))
        self.changed()
        if self.api_key is not None and headers.get("x-api-key") != self.api_key:
            return _error_response(401, "authentication_error", "invalid x-api-key")
        if "max_tokens" not in body or "model" not in body:
            return _error_response(400, "invalid_request_error", "model and max_tokens required")
        item: ScriptItem = self._queue.popleft() if self._queue else Message(echo=True)
        if isinstance(item, ErrorReply):
            if not item.in_stream:
                return _error_response(item.status, item.kind, item.message, item.retry_after)
            payload = {"type": "error", "error": {"type": item.kind, "message": item.message}}
            return StreamingResponse(
                _aiter([_sse("error", payload)]), media_type="text/event-stream"
            )
        if item.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), item.delay)
        item = self._resolve(item, body)
        if body.get("stream"):
            return StreamingResponse(self._stream(item, body), media_type="text/event-stream")
        return JSONResponse(self._complete(item, body))

    def _resolve(self, item: Message, body: dict[str, Any]) -> Message:
        if item.echo:
            item = replace(item, blocks=(text(f"echo: {_last_user_text(body)}"),), echo=False)
        blocks: list[Block] = []
        for block in item.blocks:
            if isinstance(block, ToolUseBlock) and block.id is None:
                self._ids += 1
                block = replace(block, id=f"toolu_{self._ids:04d}")
            blocks.append(block)
        return replace(item, blocks=tuple(blocks))

    def _complete(self, item: Message, body: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if item.thinking:
            content.append(
                {"type": "thinking", "thinking": "".join(item.thinking), "signature": "sig-1"}
            )
        for block in item.blocks:
            if isinstance(block, TextBlock):
                content.append({"type": "text", "text": "".join(block.chunks)})
            else:
                content.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                )
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": item.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": item.usage[0], "output_tokens": item.usage[1]},
        }

    async def _stream(self, item: Message, body: dict[str, Any]) -> AsyncIterator[bytes]:
        start = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": item.usage[0], "output_tokens": 1},
        }
        yield _sse("message_start", {"type": "message_start", "message": start})
        yield _sse("ping", {"type": "ping"})
        index = 0
        if item.thinking:
            yield _block_start(index, {"type": "thinking", "thinking": ""})
            for piece in item.thinking:
                yield _block_delta(index, {"type": "thinking_delta", "thinking": piece})
            yield _block_delta(index, {"type": "signature_delta", "signature": "sig-1"})
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        for block in item.blocks:
            if isinstance(block, TextBlock):
                yield _block_start(index, {"type": "text", "text": ""})
                if item.stall:
                    await self._closing.wait()  # a stalled stream: nothing more, ever
                    return
                for piece in block.chunks:
                    yield _block_delta(index, {"type": "text_delta", "text": piece})
                    await asyncio.sleep(0)
            else:
                start_block = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
                yield _block_start(index, start_block)
                raw = block.raw_json if block.raw_json is not None else json.dumps(block.input)
                for i in range(0, len(raw), JSON_FRAGMENT):
                    delta = {"type": "input_json_delta", "partial_json": raw[i : i + JSON_FRAGMENT]}
                    yield _block_delta(index, delta)
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": item.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": item.usage[1]},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})


def _last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    payload = {"type": "content_block_start", "index": index, "content_block": block}
    return _sse("content_block_start", payload)


def _block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return _sse(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


async def _aiter(items: list[bytes]) -> AsyncIterator[bytes]:
    for item in items:
        yield item


def _error_response(
    status: int, kind: str, message: str, retry_after: float | None = None
) -> Response:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}},
        status_code=status,
        headers=headers,
    )
