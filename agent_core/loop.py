"""The Think → Act → Observe loop.

``Loop.run`` steps:

1. emit ``run.started``, open the trace, resolve the per-user workspace;
2. build the messages: system prompt, stored history, the new user message;
3. up to ``max_iterations`` times: call the provider (streaming ``chunk`` events), and if the
   answer has tool calls, execute them (``tool.call``/``tool.result``) and loop;
4. sanitize the final answer, write the run's messages to the session in one transaction,
   emit ``run.completed`` and save the trace.

It never raises for provider or tool failures: those end as a ``RunResult`` with status
``failed``. Cancellation (``/stop``) propagates as ``asyncio.CancelledError`` after the trace is
saved with status ``cancelled``; nothing of a cancelled run is written to the session.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import structlog

from agent_core.errors import AgentError, MaxIterationsExceeded
from agent_core.events import Event, EventBus, EventType
from agent_core.messages import Message, ToolCall, Usage
from agent_core.prompt import build_system_prompt
from agent_core.providers.base import Delta, ModelRequest, ModelResponse, Provider
from agent_core.retry import RetryPolicy, call_with_retry
from agent_core.run import RunRequest, RunResult, RunStatus
from agent_core.sanitize import sanitize_output
from agent_core.settings import AgentSettings
from agent_core.store import SessionStore, TraceStore
from agent_core.tool_exec import ToolOutcome, execute_tool_calls
from agent_core.tools.base import ToolContext, ToolRegistry
from agent_core.tracing import SpanKind, Trace, new_trace
from agent_core.workspace import user_workspace

log = structlog.get_logger(__name__)

MAX_ITERATIONS_REPLY = (
    "I stopped after {n} steps without reaching an answer. "
    "Please narrow the request or ask me to continue."
)
TRUNCATION_NOTE = "\n\n[Note: the message was {n} characters long and was truncated to {limit}.]"


@dataclass
class _RunState:
    request: RunRequest
    trace: Trace
    messages: list[Message]
    buffer: list[Message] = field(default_factory=list)  # written to the session at the end
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0


@dataclass(frozen=True, slots=True)
class _Finish:
    content: str


class Loop:
    """One agent: settings, provider and tools. Safe to share between concurrent runs."""

    def __init__(
        self,
        settings: AgentSettings,
        provider: Provider,
        tools: ToolRegistry,
        store: SessionStore,
        traces: TraceStore,
        events: EventBus,
        *,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.settings = settings
        self.provider = provider
        self.tools = tools
        self.store = store
        self.traces = traces
        self.events = events

    async def run(self, request: RunRequest) -> RunResult:
        trace = new_trace(request.run_id, request.session_key, self.settings.id)
        await self._emit(request, EventType.RUN_STARTED, message=request.message)
        state: _RunState | None = None
        try:
            state = await self._prepare(request, trace)
            content, status = await self._iterate(state)
            content = sanitize_output(content)
            state.buffer.append(Message.assistant(content))
            await self.store.append_run(
                request.session_key,
                state.buffer,
                run_id=request.run_id,
                usage=state.usage,
                model=self.settings.model,
                provider=self.provider.name,
            )
        except asyncio.CancelledError:
            trace.finish("cancelled")
            # The run's own task is being cancelled: save the trace in a task of its own.
            with suppress(Exception):
                await asyncio.shield(self._save_trace(trace))
            raise
        except AgentError as exc:
            return await self._fail(request, trace, exc, state)
        except Exception as exc:  # a bug or a store failure: still a clean run.failed
            log.exception("run.crashed", run_id=request.run_id)
            return await self._fail(request, trace, exc, state)

        result = RunResult(
            run_id=request.run_id,
            status=status,
            content=content,
            usage=state.usage,
            iterations=state.iterations,
        )
        trace.input_tokens, trace.output_tokens = (
            state.usage.input_tokens,
            state.usage.output_tokens,
        )
        trace.finish(str(status), output=content)
        await self._emit(
            request, EventType.RUN_COMPLETED, content=content, usage=state.usage.as_dict()
        )
        await self._save_trace(trace)
        return result

    async def _prepare(self, request: RunRequest, trace: Trace) -> _RunState:
        workspace = user_workspace(self.settings.workspace, request.user_id)
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
        history = await self.store.load_history(request.session_key)
        system = build_system_prompt(self.settings, request, self.tools, workspace)
        messages = [Message.system(system)]
        if history.summary:
            messages += [
                Message.user(f"[Summary of earlier conversation]\n{history.summary}"),
                Message.assistant("I understand the context of our earlier conversation."),
            ]
        messages += history.messages
        user = Message.user(self._bounded_input(request.message))
        messages.append(user)
        return _RunState(request=request, trace=trace, messages=messages, buffer=[user])

    def _bounded_input(self, text: str) -> str:
        limit = self.settings.max_message_chars
        if len(text) <= limit:
            return text
        return text[:limit] + TRUNCATION_NOTE.format(n=len(text), limit=limit)

    async def _iterate(self, state: _RunState) -> tuple[str, RunStatus]:
        cap = state.request.max_iterations or self.settings.max_iterations
        try:
            for iteration in range(1, cap + 1):
                state.iterations = iteration
                step = await self._think_act_observe(state, iteration)
                if isinstance(step, _Finish):
                    return step.content, RunStatus.COMPLETED
            raise MaxIterationsExceeded(cap)
        except MaxIterationsExceeded as exc:
            log.warning("run.max_iterations", run_id=state.request.run_id, cap=exc.max_iterations)
            state.trace.root.attributes["stop_reason"] = str(exc)
            return MAX_ITERATIONS_REPLY.format(n=exc.max_iterations), RunStatus.MAX_ITERATIONS

    async def _think_act_observe(self, state: _RunState, iteration: int) -> _Finish | None:
        request = state.request
        await self._emit(request, EventType.ACTIVITY, phase="thinking", iteration=iteration)
        response = await self._call_model(state, iteration)
        if not response.tool_calls:
            return _Finish(response.content)

        calls = tuple(response.tool_calls)
        assistant = Message.assistant(response.content, tool_calls=calls)
        state.messages.append(assistant)
        state.buffer.append(assistant)
        if response.content.strip():
            await self._emit(request, EventType.BLOCK_REPLY, content=response.content)
        await self._emit(request, EventType.ACTIVITY, phase="tool_exec", iteration=iteration)
        outcomes = await self._run_tools(state, list(calls))
        for outcome in outcomes:
            tool_message = Message.tool(outcome.call, outcome.content)
            state.messages.append(tool_message)
            state.buffer.append(tool_message)
        return None

    async def _call_model(self, state: _RunState, iteration: int) -> ModelResponse:
        request = state.request
        span = state.trace.start_span(
            SpanKind.LLM,
            f"{self.provider.name}/{self.settings.model}",
            provider=self.provider.name,
            model=self.settings.model,
            iteration=iteration,
        )

        async def on_delta(delta: Delta) -> None:
            kind = EventType.CHUNK if delta.kind == "text" else EventType.THINKING
            await self._emit(request, kind, content=delta.content)

        model_request = ModelRequest(
            model=self.settings.model,
            messages=state.messages,
            tools=self.tools.specs(),
            stream=request.stream and self.settings.stream,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
        )

        async def on_retry(attempt: int, max_attempts: int, exc: BaseException) -> None:
            log.info("provider.retrying", attempt=attempt, error=str(exc)[:200])
            await self._emit(
                request,
                EventType.RUN_RETRYING,
                attempt=attempt,
                maxAttempts=max_attempts,
                error=str(exc)[:500],
            )

        try:
            response = await call_with_retry(
                lambda: self.provider.complete(model_request, on_delta), self.retry, on_retry
            )
        except BaseException as exc:
            span.end(error=True, error_message=str(exc)[:500])
            raise
        state.usage.add(response.usage)
        span.end(
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            tool_calls=len(response.tool_calls),
        )
        return response

    async def _run_tools(self, state: _RunState, calls: list[ToolCall]) -> list[ToolOutcome]:
        request = state.request
        ctx = ToolContext(
            workspace=user_workspace(self.settings.workspace, request.user_id),
            session_key=request.session_key,
            user_id=request.user_id,
            agent_id=self.settings.id,
            run_id=request.run_id,
        )

        async def before(call: ToolCall) -> None:
            try:
                arguments: Any = call.parsed_arguments()
            except ValueError:
                arguments = call.arguments
            await self._emit(
                request, EventType.TOOL_CALL, name=call.name, id=call.id, arguments=arguments
            )

        async def after(outcome: ToolOutcome, duration_ms: float) -> None:
            span = state.trace.start_span(SpanKind.TOOL, outcome.call.name)
            span.duration_ms = duration_ms
            span.error = outcome.is_error
            await self._emit(
                request,
                EventType.TOOL_RESULT,
                name=outcome.call.name,
                id=outcome.call.id,
                is_error=outcome.is_error,
                result=outcome.content,
            )

        return await execute_tool_calls(calls, self.tools, ctx, before=before, after=after)

    async def _fail(
        self, request: RunRequest, trace: Trace, exc: BaseException, state: _RunState | None
    ) -> RunResult:
        usage = state.usage if state else Usage()
        log.warning("run.failed", run_id=request.run_id, error=str(exc), kind=type(exc).__name__)
        trace.input_tokens, trace.output_tokens = usage.input_tokens, usage.output_tokens
        trace.finish("error", error=str(exc))
        await self._emit(request, EventType.RUN_FAILED, error=str(exc))
        await self._save_trace(trace)
        return RunResult(
            run_id=request.run_id,
            status=RunStatus.FAILED,
            usage=usage,
            iterations=state.iterations if state else 0,
            error=f"{type(exc).__name__}: {exc}",
        )

    async def _emit(self, request: RunRequest, type_: EventType, **payload: Any) -> None:
        await self.events.publish(Event(type_, request.run_id, request.session_key, payload))

    async def _save_trace(self, trace: Trace) -> None:
        try:
            await self.traces.save_trace(trace)
        except Exception:
            log.exception("trace.save_failed", trace_id=trace.id)
