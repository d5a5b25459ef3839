"""A provider for the Anthropic Messages API (``POST {base_url}/v1/messages``).

Same contract as :mod:`agent_core.providers._openai_compat`: one HTTP call per ``complete()``, no
retries (the loop owns them), only :class:`~agent_core.errors.ProviderError` subclasses raised.

What differs from Chat Completions, and how it is mapped:

- the system prompt is a top-level ``system`` field, not a message;
- tool calls are ``tool_use`` content blocks whose ``input`` is a JSON object; tool results go
  back as ``tool_result`` blocks inside a *user* message (consecutive ones merged);
- extended thinking arrives as ``thinking`` blocks. They are streamed as ``thinking`` deltas and
  never become answer text. With thinking enabled the API requires the thinking blocks of a
  tool-using turn to be sent back unchanged (with their signature) on the next call; our stored
  ``Message`` has no place for them, so the provider remembers them by tool-use id.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from agent_core.messages import Message, ToolCall, Usage
from agent_core.providers._transport import (
    DeltaHandlerFailed,
    JsonEndpoint,
    parse_retry_after,
    translate_errors,
)
from agent_core.providers.base import Delta, DeltaHandler, ModelRequest, ModelResponse, ToolSpec

if TYPE_CHECKING:  # imported with the first session, as for the OpenAI-compatible provider
    import aiohttp

log = structlog.get_logger(__name__)

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires ``max_tokens``; used when neither the request nor config sets it."""
_MAX_ERROR_TEXT = 500
_THINKING_MEMORY = 512  # tool-using turns whose thinking blocks are remembered
_REDACTED = "[REDACTED]"


class AnthropicProvider:
    """One model call against the Anthropic Messages API, streamed (SSE) or not."""

    def __init__(
        self,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str = "",
        *,
        name: str = "anthropic",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking_budget: int | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.name = name
        base = base_url.rstrip("/")
        # Accept both ``https://api.anthropic.com`` and ``https://api.anthropic.com/v1``.
        self._url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        self._api_key = api_key
        self._max_tokens = max_tokens
        self._thinking_budget = thinking_budget
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self._endpoint = JsonEndpoint(
            self._url,
            headers,
            self._status_error,
            timeout=timeout,
            connect_timeout=connect_timeout,
            session=session,
        )
        self._thinking: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self.name!r}, url={self._url!r})"

    async def aclose(self) -> None:
        """Close the HTTP session, but only if we created it (a passed-in one is the caller's)."""
        await self._endpoint.aclose()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        body = self.build_body(request)
        started = time.monotonic()
        try:
            with translate_errors(self.name, self._redact):
                if request.stream:
                    response, blocks = await self._complete_streaming(body, on_delta)
                else:
                    response, blocks = await self._complete_once(body)
        except DeltaHandlerFailed as exc:
            raise exc.original from None
        except ProviderError as exc:
            log.warning(
                "provider.error",
                provider=self.name,
                model=request.model,
                error_type=type(exc).__name__,
                status_code=exc.status_code,
                error=str(exc),
            )
            raise
        self._remember_thinking(response, blocks)
        log.debug(
            "provider.response",
            provider=self.name,
            model=request.model,
            finish_reason=response.finish_reason,
            tool_calls=len(response.tool_calls),
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            duration_ms=round((time.monotonic() - started) * 1000),
        )
        return response

    # -- request -----------------------------------------------------------------------------

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``/v1/messages``; optional keys are omitted."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or self._max_tokens,
            "messages": self._messages_to_wire(request.messages),
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [tool_to_wire(t) for t in request.tools]
        if self._thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
        elif request.temperature is not None:  # the API rejects temperature with thinking on
            body["temperature"] = request.temperature
        if request.stream:
            body["stream"] = True
        return body

    def _messages_to_wire(self, messages: list[Message]) -> list[dict[str, Any]]:
        wire: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "system":
                continue
            role = "assistant" if message.role == "assistant" else "user"
            blocks = self._blocks(message)
            if not blocks:
                continue
            # The API wants user/assistant alternation: merge runs of the same role (several
            # tool results in a row become one user message, as the API documents).
            if wire and wire[-1]["role"] == role:
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": role, "content": blocks})
        return wire

    def _blocks(self, message: Message) -> list[dict[str, Any]]:
        if message.role == "tool":
            return [
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id or "",
                    "content": message.content,
                }
            ]
        blocks: list[dict[str, Any]] = []
        if message.role == "assistant" and message.tool_calls:
            blocks += self._thinking.get(message.tool_calls[0].id, [])
        for image in message.images:  # the API advises images before the text about them
            source = {"type": "base64", "media_type": image.mime, "data": image.base64()}
            blocks.append({"type": "image", "source": source})
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)}
            )
        return blocks

    def _remember_thinking(self, response: ModelResponse, blocks: list[dict[str, Any]]) -> None:
        if not response.tool_calls or not blocks:
            return
        self._thinking[response.tool_calls[0].id] = blocks
        while len(self._thinking) > _THINKING_MEMORY:
            self._thinking.popitem(last=False)

    # -- transport ---------------------------------------------------------------------------

    async def _complete_once(
        self, body: dict[str, Any]
    ) -> tuple[ModelResponse, list[dict[str, Any]]]:
        text = await self._endpoint.post_json(body)
        return parse_message(self._json(text))

    async def _complete_streaming(
        self, body: dict[str, Any], on_delta: DeltaHandler | None
    ) -> tuple[ModelResponse, list[dict[str, Any]]]:
        async with self._endpoint.post_for_stream(body) as events:
            if isinstance(events, str):
                return parse_message(self._json(events))
            assembler = _StreamAssembler()
            async for event in events:
                if not event.data.strip():
                    continue
                payload = self._json(event.data)  # an ``error`` payload is raised here
                if event.event == "error":
                    raise self._stream_error(payload)
                for delta in assembler.feed(payload):
                    if on_delta is not None:
                        try:
                            await on_delta(delta)
                        except Exception as exc:
                            raise DeltaHandlerFailed(exc) from exc
                if assembler.done:
                    break
            return assembler.finish()

    # -- errors ------------------------------------------------------------------------------

    def _status_error(
        self, status: int, reason: str | None, headers: Mapping[str, str], text: str
    ) -> ProviderError:
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        detail = _error_text(payload) or text.strip() or reason or ""
        message = f"{self.name}: HTTP {status}: {self._redact(detail[:_MAX_ERROR_TEXT])}"
        if status == 429:
            return RateLimited(message, retry_after=parse_retry_after(headers))
        if status >= 500:  # includes 529 overloaded
            return ProviderUnavailable(message, status_code=status)
        if status == 408:
            return ProviderTimeout(message, status_code=status)
        return ProviderError(message, status_code=status)

    def _stream_error(self, payload: dict[str, Any]) -> ProviderError:
        error = payload.get("error")
        kind = str(error.get("type", "")) if isinstance(error, dict) else ""
        message = f"{self.name}: {kind or 'error'}: {self._redact(_error_text(payload) or '')}"
        if kind == "rate_limit_error":
            return RateLimited(message)
        if kind in {"overloaded_error", "api_error"}:
            return ProviderUnavailable(message)
        return ProviderError(message)

    def _json(self, text: str) -> dict[str, Any]:
        try:
            payload = json.loads(text)
        except ValueError as exc:
            snippet = self._redact(text[:200])
            raise ProviderError(f"{self.name}: response is not valid JSON: {snippet!r}") from exc
        if not isinstance(payload, dict):
            raise ProviderError(f"{self.name}: unexpected response: {type(payload).__name__}")
        if payload.get("type") == "error":
            raise self._stream_error(payload)
        return payload

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            return text.replace(self._api_key, _REDACTED)
        return text


# -- wire format -------------------------------------------------------------------------------


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _input(call: ToolCall) -> dict[str, Any]:
    """``tool_use.input`` must be an object; invalid JSON (already answered with an error
    tool result) is sent back as ``{}`` so the conversation stays valid."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return {}


def parse_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    # Cached prompt tokens are reported apart from ``input_tokens``; they are still input.
    inputs = sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    cached = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    return Usage(inputs, int(usage.get("output_tokens") or 0), cached, written)


def parse_message(payload: dict[str, Any]) -> tuple[ModelResponse, list[dict[str, Any]]]:
    """A non-streamed ``message`` body, plus its thinking blocks (to send back later)."""
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    thinking_blocks: list[dict[str, Any]] = []
    for block in payload.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thinking.append(block.get("thinking") or "")
            thinking_blocks.append(block)
        elif kind == "redacted_thinking":
            thinking_blocks.append(block)
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(ToolCall(block["id"], block["name"], arguments))
    response = ModelResponse(
        content="".join(text),
        tool_calls=calls,
        usage=parse_usage(payload.get("usage")),
        finish_reason=payload.get("stop_reason"),
        thinking="".join(thinking),
    )
    return response, thinking_blocks


def _error_text(payload: Any) -> str | None:
    """``{"type": "error", "error": {"type": ..., "message": ...}}``."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        message = payload["error"].get("message")
        return str(message) if message is not None else None
    return None


@dataclass
class _Block:
    type: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    signature: str = ""
    data: str = ""


@dataclass
class _StreamAssembler:
    """Builds one response from the Messages streaming events."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    done: bool = False

    def feed(self, event: dict[str, Any]) -> list[Delta]:
        kind = event.get("type")
        if kind == "message_start":
            self.usage = parse_usage((event.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[int(event["index"])] = _Block(
                type=block.get("type", ""),
                id=block.get("id", ""),
                name=block.get("name", ""),
                data=block.get("data", ""),
            )
        elif kind == "content_block_delta":
            return self._delta(self.blocks[int(event["index"])], event.get("delta") or {})
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            delta_usage = event.get("usage") or {}
            if delta_usage.get("output_tokens") is not None:  # cumulative: the last one wins
                self.usage.output_tokens = int(delta_usage["output_tokens"])
        elif kind == "message_stop":
            self.done = True
        return []

    @staticmethod
    def _delta(block: _Block, delta: dict[str, Any]) -> list[Delta]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            block.text.append(delta["text"])
            return [Delta("text", delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            block.text.append(delta["thinking"])
            return [Delta("thinking", delta["thinking"])]
        if kind == "input_json_delta":
            block.text.append(delta.get("partial_json") or "")
        elif kind == "signature_delta":
            block.signature += delta.get("signature") or ""
        return []

    def finish(self) -> tuple[ModelResponse, list[dict[str, Any]]]:
        if not self.done:
            raise ProviderUnavailable("stream ended early (no message_stop)")
        text: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        thinking_blocks: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            joined = "".join(block.text)
            if block.type == "text":
                text.append(joined)
            elif block.type == "thinking":
                thinking.append(joined)
                thinking_blocks.append(
                    {"type": "thinking", "thinking": joined, "signature": block.signature}
                )
            elif block.type == "redacted_thinking":
                thinking_blocks.append({"type": "redacted_thinking", "data": block.data})
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, joined or "{}"))
        response = ModelResponse(
            content="".join(text),
            tool_calls=calls,
            usage=self.usage,
            finish_reason=self.stop_reason,
            thinking="".join(thinking),
        )
        return response, thinking_blocks
