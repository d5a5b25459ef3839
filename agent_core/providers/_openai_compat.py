"""A provider for any OpenAI-compatible Chat Completions API (OpenAI, Ollama, vLLM, OpenRouter…).

The Chat Completions wire format is the de-facto lingua franca of LLM servers, so one small,
careful client covers most deployments. The provider does exactly one HTTP call per
``complete()`` and never retries: the agent loop owns retry policy, and it needs the typed
errors from :mod:`agent_core.errors` (``transient`` tells it what is worth retrying).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from agent_core.errors import ProviderError, ProviderUnavailable, RateLimited
from agent_core.messages import Message, ToolCall, Usage
from agent_core.providers._transport import (
    DeltaHandlerFailed,
    JsonEndpoint,
    translate_errors,
)
from agent_core.providers._transport import parse_retry_after as parse_retry_after  # re-exported
from agent_core.providers.base import Delta, DeltaHandler, ModelRequest, ModelResponse, ToolSpec

if TYPE_CHECKING:  # imported with the first session, so a start-up without this provider skips it
    import aiohttp

log = structlog.get_logger(__name__)

# Server error bodies are echoed into exception messages (users and logs see them); cap them
# so an HTML error page from a misconfigured proxy does not flood either.
_MAX_ERROR_TEXT = 500
_REDACTED = "[REDACTED]"


class OpenAICompatProvider:
    """One model call against ``{base_url}/chat/completions``, streamed (SSE) or not."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        *,
        name: str = "openai",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        session: aiohttp.ClientSession | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        headers = {"Content-Type": "application/json", **(extra_headers or {})}
        if api_key:
            # Only with a key: local servers (Ollama) need none, and some reject an empty Bearer.
            headers["Authorization"] = f"Bearer {api_key}"
        self._endpoint = JsonEndpoint(
            self._url,
            headers,
            self._status_error,
            timeout=timeout,
            connect_timeout=connect_timeout,
            session=session,
        )

    def __repr__(self) -> str:
        # Never let the key end up in a repr (logs, tracebacks with locals).
        return f"OpenAICompatProvider(name={self.name!r}, url={self._url!r})"

    async def aclose(self) -> None:
        """Close the HTTP session, but only if we created it (a passed-in one is the caller's)."""
        await self._endpoint.aclose()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaHandler | None = None
    ) -> ModelResponse:
        """Call the model once; stream deltas to ``on_delta`` when ``request.stream``.

        Raises :class:`ProviderError` subclasses only (never aiohttp errors) and does not retry.
        """
        body = build_request_body(request)
        started = time.monotonic()
        log.debug(
            "provider.request",
            provider=self.name,
            model=request.model,
            stream=request.stream,
            messages=len(request.messages),
            tools=len(request.tools),
        )
        try:
            with translate_errors(self.name, self._redact):
                if request.stream:
                    response = await self._complete_streaming(body, on_delta)
                else:
                    response = await self._complete_once(body)
        except DeltaHandlerFailed as exc:
            # The caller's own failure (e.g. a channel's HTTP edit): re-raise it untranslated.
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

    # -- transport ---------------------------------------------------------------------------

    async def _complete_once(self, body: dict[str, Any]) -> ModelResponse:
        text = await self._endpoint.post_json(body)
        return parse_completion(self._json(text))

    async def _complete_streaming(
        self, body: dict[str, Any], on_delta: DeltaHandler | None
    ) -> ModelResponse:
        async with self._endpoint.post_for_stream(body) as events:
            if isinstance(events, str):  # one JSON body after all
                return parse_completion(self._json(events))
            assembler = _StreamAssembler()
            async for event in events:
                if event.data.strip() == "[DONE]":
                    assembler.done = True
                    break
                if not event.data.strip():
                    continue
                chunk = self._json(event.data)
                for delta in assembler.feed(chunk):
                    if on_delta is not None:
                        try:
                            await on_delta(delta)
                        except Exception as exc:
                            raise DeltaHandlerFailed(exc) from exc
            return assembler.finish()

    # -- errors ------------------------------------------------------------------------------

    def _status_error(
        self, status: int, reason: str | None, headers: Mapping[str, str], text: str
    ) -> ProviderError:
        """The typed error for an HTTP error status, with the server's own message."""
        message = f"{self.name}: HTTP {status}: {self._error_message(text, reason)}"
        if status == 429:
            return RateLimited(message, retry_after=parse_retry_after(headers))
        if status >= 500:
            return ProviderUnavailable(message, status_code=status)
        return ProviderError(message, status_code=status)

    def _error_message(self, text: str, reason: str | None) -> str:
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        message = _error_text(payload) if payload is not None else None
        if message is None:
            message = text.strip() or reason or "no details"
        return self._redact(message[:_MAX_ERROR_TEXT])

    def _json(self, text: str) -> dict[str, Any]:
        """Parse a response body or SSE payload; an ``error`` object inside it is raised."""
        try:
            payload = json.loads(text)
        except ValueError as exc:
            snippet = self._redact(text[:200])
            raise ProviderError(f"{self.name}: response is not valid JSON: {snippet!r}") from exc
        if not isinstance(payload, dict):
            raise ProviderError(f"{self.name}: unexpected response: {type(payload).__name__}")
        if payload.get("error"):
            message = _error_text(payload) or "unknown error"
            code = payload["error"].get("code") if isinstance(payload["error"], dict) else None
            status = code if isinstance(code, int) else None
            raise ProviderError(
                f"{self.name}: {self._redact(message[:_MAX_ERROR_TEXT])}", status_code=status
            )
        return payload

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key back ("Incorrect API key provided: sk-…")."""
        if self._api_key and self._api_key in text:
            return text.replace(self._api_key, _REDACTED)
        return text


# -- wire format: request ----------------------------------------------------------------------


def build_request_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body for ``/chat/completions``; optional keys are omitted, not sent as null."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [message_to_wire(m) for m in request.messages],
    }
    if request.tools:
        body["tools"] = [tool_to_wire(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.stream:
        body["stream"] = True
        # Without this, streamed responses carry no token usage at all.
        body["stream_options"] = {"include_usage": True}
    return body


def message_to_wire(message: Message) -> dict[str, Any]:
    """One stored message in the OpenAI shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # The API wants null, not "", for a tool-calls-only turn (some servers reject "").
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments or "{}"},
                }
                for call in message.tool_calls
            ],
        }
    if message.images:
        parts: list[dict[str, Any]] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        for image in message.images:
            parts.append({"type": "image_url", "image_url": {"url": image.data_url()}})
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


# -- wire format: response ---------------------------------------------------------------------


def parse_completion(payload: dict[str, Any]) -> ModelResponse:
    """A non-streamed ``chat.completion`` body."""
    choices = payload.get("choices") or []
    if not choices:
        raise ProviderError("response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    tool_calls = [
        ToolCall(
            id=call.get("id") or _fallback_call_id(),
            name=(call.get("function") or {}).get("name") or "",
            arguments=(call.get("function") or {}).get("arguments") or "",
        )
        for call in message.get("tool_calls") or []
    ]
    return ModelResponse(
        content=message.get("content") or "",
        tool_calls=tool_calls,
        usage=parse_usage(payload.get("usage")),
        finish_reason=choice.get("finish_reason"),
        thinking=_reasoning(message),
    )


def parse_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(cached or 0),
    )


def _reasoning(obj: dict[str, Any]) -> str:
    """Reasoning: ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, OpenRouter)."""
    value = obj.get("reasoning_content") or obj.get("reasoning")
    return value if isinstance(value, str) else ""


def _error_text(payload: Any) -> str | None:
    """``{"error": {"message": ...}}`` (OpenAI) or ``{"error": "..."}`` (Ollama and others)."""
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return None


def _fallback_call_id() -> str:
    # Some local servers omit ids, but tool results must reference one.
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAssembler:
    """Builds one :class:`ModelResponse` from ``chat.completion.chunk`` events."""

    content: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    done: bool = False

    def feed(self, chunk: dict[str, Any]) -> list[Delta]:
        """Absorb one chunk; return the deltas to forward, in order."""
        if isinstance(chunk.get("usage"), dict):
            # Sent on the final chunk (some servers repeat it cumulatively); the last one wins.
            self.usage = parse_usage(chunk["usage"])
        deltas: list[Delta] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = _reasoning(delta)
            if reasoning:
                self.thinking.append(reasoning)
                deltas.append(Delta("thinking", reasoning))
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                deltas.append(Delta("text", text))
            for call in delta.get("tool_calls") or []:
                self._feed_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return deltas

    def _feed_call(self, call: dict[str, Any]) -> None:
        # id and name arrive in the first fragment of each index, arguments in later ones.
        index = call.get("index")
        if not isinstance(index, int):
            index = self._index_without_index(call.get("id"))
        partial = self.calls.setdefault(index, _PartialCall())
        if call.get("id"):
            partial.id = call["id"]
        function = call.get("function") or {}
        if function.get("name"):
            partial.name = function["name"]
        if function.get("arguments"):
            partial.arguments.append(function["arguments"])

    def _index_without_index(self, call_id: Any) -> int:
        """A few servers omit ``index``: an unseen id starts a new call, else continue one."""
        for index, partial in self.calls.items():
            if call_id and partial.id == call_id:
                return index
        if call_id or not self.calls:
            return len(self.calls)
        return max(self.calls)

    def finish(self) -> ModelResponse:
        if not self.done and self.finish_reason is None:
            raise ProviderUnavailable("stream ended early (no finish_reason and no [DONE])")
        return ModelResponse(
            content="".join(self.content),
            tool_calls=[
                ToolCall(
                    id=p.id or _fallback_call_id(), name=p.name, arguments="".join(p.arguments)
                )
                for _, p in sorted(self.calls.items())
            ],
            usage=self.usage,
            finish_reason=self.finish_reason,
            thinking="".join(self.thinking),
        )
