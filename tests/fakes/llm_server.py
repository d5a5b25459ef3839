"""A real-HTTP fake of an OpenAI-compatible Chat Completions server, for tests.

It listens on 127.0.0.1 (a free port), inside the test's own event loop, and answers
``POST /v1/chat/completions`` (streamed as SSE or as one JSON body, like the real API) and
``GET /v1/models``. Tests script what the "model" says next::

    async with FakeLLM() as llm:
        llm.script(
            text("Hel", "lo"),                                    # streamed as two chunks
            tool_calls(call("read_file", {"path": "a.txt"})),
            error(429, retry_after=1),
            delay(5.0, text("late")),
        )
        provider = OpenAICompatProvider(llm.base_url)
        ...
        assert llm.requests[0].json["messages"][-1]["content"] == "hi"

When the script is empty the server answers ``echo: <last user message>``. Every request
(JSON body and headers) is recorded in ``llm.requests``.

The script items and their builders are in :mod:`tests.fakes.llm_script`; they are re-exported
here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.llm_script import (
    ErrorReply,
    FakeCall,
    Reply,
    ScriptItem,
    call,
    delay,
    echo,
    error,
    stream_error,
    text,
    tool_calls,
)
from tests.fakes.server import FakeServer

__all__ = [
    "AudioUpload",
    "ErrorReply",
    "FakeCall",
    "FakeLLM",
    "RecordedRequest",
    "Reply",
    "call",
    "delay",
    "echo",
    "error",
    "stream_error",
    "text",
    "tool_calls",
]

ARGUMENT_FRAGMENT = 7  # characters per streamed tool-argument fragment
DONE: Final = "[DONE]"  # the stream terminator, as a chunk sentinel


# -- recorded requests ---------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    json: Any = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of a completion request (empty for other requests)."""
        if isinstance(self.json, dict):
            return list(self.json.get("messages") or [])
        return []


@dataclass(frozen=True)
class AudioUpload:
    """The audio a ``/audio/transcriptions`` request uploaded."""

    filename: str
    content_type: str
    data: bytes
    model: str


# -- the server ----------------------------------------------------------------------------


class FakeLLM(FakeServer):
    """The fake server. Use as ``async with FakeLLM() as llm`` (or ``await start()/stop()``)."""

    name = "FakeLLM"
    url_path = "/v1"

    def __init__(self, model: str = "fake-model", *, api_key: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.api_key = api_key  # when set, requests without ``Bearer <api_key>`` get 401
        self.requests: list[RecordedRequest] = []
        self._queue: deque[ScriptItem] = deque()
        self._routes: list[tuple[str, deque[ScriptItem]]] = []
        self._call_counter = 0
        self.audio_uploads: list[AudioUpload] = []
        """Every ``/audio/transcriptions`` request's file and model, in order."""
        self._transcripts: deque[str | ErrorReply] = deque()
        self.audio_formats: frozenset[str] | None = None
        """When set, uploads of another content type are refused as OpenAI does (400)."""

    # public API

    def script(self, *items: ScriptItem) -> None:
        """Queue the next answers, consumed one per chat-completion request."""
        self._queue.extend(items)

    def route(self, marker: str, *items: ScriptItem) -> None:
        """Queue answers only for requests whose system prompt contains ``marker`` (e.g.
        ``"agent=billing "`` or ``"/spawn/"``), taken before the shared script. Runs of several
        agents at once (orchestration) then get their own answers whatever the order."""
        for known, queue in self._routes:
            if known == marker:
                queue.extend(items)
                return
        self._routes.append((marker, deque(items)))

    def script_transcripts(self, *items: str | ErrorReply) -> None:
        """Queue the next transcriptions (a text, or ``error(...)`` / ``delay(...)``), one per
        ``/audio/transcriptions`` request; unscripted, the answer is ``heard <n> bytes of
        <filename>``."""
        self._transcripts.extend(items)

    @property
    def remaining(self) -> int:
        """Script items not consumed yet (routed ones included)."""
        return len(self._queue) + sum(len(q) for _, q in self._routes)

    def _next_item(self, body: dict[str, Any]) -> ScriptItem:
        messages = body.get("messages") or []
        system = (
            messages[0].get("content") if messages and messages[0].get("role") == "system" else ""
        )
        for marker, queue in self._routes:
            if queue and isinstance(system, str) and marker in system:
                return queue.popleft()
        return self._queue.popleft() if self._queue else echo()

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def last_request(self) -> RecordedRequest:
        return self.chat_requests[-1]

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/audio/transcriptions", self._transcription, methods=["POST"]),
            ]
        )

    def timeout_detail(self) -> str:
        return f"last requests: {[r.path for r in self.requests[-15:]]}"

    # handlers

    async def _record(self, request: Request) -> RecordedRequest:
        body = await request.body()
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            json=json.loads(body) if body else None,
        )
        self.requests.append(recorded)
        self.changed()
        return recorded

    def _unauthorized(self, recorded: RecordedRequest) -> Response | None:
        if (
            self.api_key is None
            or recorded.headers.get("authorization") == f"Bearer {self.api_key}"
        ):
            return None
        return _error_response(401, "Incorrect API key provided.")

    async def _models(self, request: Request) -> Response:
        recorded = await self._record(request)
        denied = self._unauthorized(recorded)
        if denied is not None:
            return denied
        return JSONResponse(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        )

    async def _transcription(self, request: Request) -> Response:
        # The OpenAI audio API: multipart/form-data with ``file`` and ``model``.
        headers = {k.lower(): v for k, v in request.headers.items()}
        fields: dict[str, str] = {}
        upload: AudioUpload | None = None
        async with request.form() as form:
            for key, value in form.multi_items():
                if isinstance(value, str):
                    fields[key] = value
                elif key == "file":
                    upload = AudioUpload(
                        value.filename or "", value.content_type or "", await value.read(), ""
                    )
        recorded = RecordedRequest(request.method, request.url.path, headers, fields)
        self.requests.append(recorded)
        denied = self._unauthorized(recorded)
        if denied is not None:
            self.changed()
            return denied
        if upload is None or "model" not in fields:
            self.changed()
            return _error_response(400, "file and model are required")
        upload = replace(upload, model=fields["model"])
        self.audio_uploads.append(upload)
        self.changed()
        if self.audio_formats is not None and upload.content_type not in self.audio_formats:
            return _error_response(400, "Invalid file format. Supported formats: wav")
        item = self._transcripts.popleft() if self._transcripts else None
        if isinstance(item, ErrorReply):
            if item.delay:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), timeout=item.delay)
            return _error_response(item.status, item.message, item.retry_after)
        said = item if item is not None else f"heard {len(upload.data)} bytes of {upload.filename}"
        return JSONResponse({"text": said})

    async def _chat(self, request: Request) -> Response:
        recorded = await self._record(request)
        denied = self._unauthorized(recorded)
        if denied is not None:
            return denied
        body = recorded.json if isinstance(recorded.json, dict) else {}
        item = self._next_item(body)
        if item.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=item.delay)
        stream = bool(body.get("stream"))
        if isinstance(item, ErrorReply):
            if not item.in_stream:
                return _error_response(item.status, item.message, item.retry_after)
            payload = {"error": {"message": item.message, "type": "server_error", "code": None}}
            if stream:
                return _sse([payload])
            return JSONResponse(payload)
        reply = self._resolve(item, body)
        if stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return _sse(self._chunks(reply, body, include_usage), pace=reply.pace)
        return JSONResponse(self._completion(reply, body))

    # response building

    def _resolve(self, reply: Reply, body: dict[str, Any]) -> Reply:
        """Fill in echo text and call ids."""
        if reply.echo:
            users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
            last = _text_of(users[-1].get("content")) if users else ""
            reply = replace(reply, chunks=(f"echo: {last}",), echo=False)
        calls = []
        for c in reply.tool_calls:
            self._call_counter += 1
            calls.append(c if c.id else replace(c, id=f"call_{self._call_counter}"))
        return replace(reply, tool_calls=tuple(calls))

    def _usage(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:  # deterministic word counts, good enough to check accounting
            prompt = sum(
                len(_text_of(m.get("content")).split()) for m in body.get("messages") or []
            )
            completion = len("".join(reply.chunks).split()) + len(reply.tool_calls)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reply.cached_tokens:  # as OpenAI reports prompt caching
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        return usage

    def _envelope(self, body: dict[str, Any], obj: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model", self.model),
        }

    def _completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks) or None}
        if reply.reasoning:
            message[reply.reasoning_field] = "".join(reply.reasoning)
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        return {
            **self._envelope(body, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": self._usage(reply, body),
        }

    def _chunks(
        self, reply: Reply, body: dict[str, Any], include_usage: bool
    ) -> Iterator[dict[str, Any] | str]:
        """The ``chat.completion.chunk`` objects of a streamed answer, in wire order."""
        envelope = self._envelope(body, "chat.completion.chunk")
        extra = {"usage": None} if include_usage else {}  # the real API sends null until the end

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return {**envelope, "choices": [choice], **extra}

        yield chunk({"role": "assistant", "content": ""})
        for piece in reply.reasoning:
            yield chunk({reply.reasoning_field: piece})
        for piece in reply.chunks:
            yield chunk({"content": piece})
        if reply.cut_off:
            return
        for fragment in _tool_call_fragments(reply.tool_calls, reply.interleave):
            yield chunk({"tool_calls": [fragment]})
        yield chunk({}, reply.finish_reason)
        if include_usage:
            yield {**envelope, "choices": [], "usage": self._usage(reply, body)}
        yield DONE


def _tool_call_fragments(calls: tuple[FakeCall, ...], interleave: bool) -> Iterator[dict[str, Any]]:
    """Per call: a header (index, id, name), then the arguments in small fragments."""
    pieces = [
        [
            c.arguments[i : i + ARGUMENT_FRAGMENT]
            for i in range(0, len(c.arguments), ARGUMENT_FRAGMENT)
        ]
        for c in calls
    ]

    def header(index: int, c: FakeCall) -> dict[str, Any]:
        return {
            "index": index,
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }

    def args(index: int, piece: str) -> dict[str, Any]:
        return {"index": index, "function": {"arguments": piece}}

    if not interleave:
        for index, c in enumerate(calls):
            yield header(index, c)
            for piece in pieces[index]:
                yield args(index, piece)
        return
    for index, c in enumerate(calls):
        yield header(index, c)
    for round_ in range(max((len(p) for p in pieces), default=0)):
        for index, parts in enumerate(pieces):
            if round_ < len(parts):
                yield args(index, parts[round_])


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list (images left out, as
    the echo must not send a data URL back to the chat)."""
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content or "")


def _sse(chunks: Iterable[dict[str, Any] | str], *, pace: float = 0.0) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        for chunk in chunks:
            if chunk == DONE:
                yield b"data: [DONE]\n\n"
            else:
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            await asyncio.sleep(pace)  # let each chunk go out on its own

    return StreamingResponse(events(), media_type="text/event-stream")


def _error_response(status: int, message: str, retry_after: float | str | None = None) -> Response:
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    kind = (
        "rate_limit_exceeded"
        if status == 429
        else "server_error"
        if status >= 500
        else "invalid_request_error"
    )
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        status_code=status,
        headers=headers,
    )
