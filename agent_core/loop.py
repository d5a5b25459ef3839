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
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import structlog

from agent_core.bootstrap import Workspaces
from agent_core.context_budget import BUDGET_EXCEEDED_REPLY, ContextBudget
from agent_core.errors import AgentError, MaxIterationsExceeded, ProviderError
from agent_core.events import Event, EventBus, EventType
from agent_core.hooks import PreToolUseHook
from agent_core.input_guard import BLOCKED_REPLY
from agent_core.input_guard import check as guard_input
from agent_core.locks import SharedLocks
from agent_core.messages import Message, ToolCall, Usage
from agent_core.providers.base import Delta, ModelRequest, ModelResponse, Provider
from agent_core.retry import RetryPolicy, call_with_retry
from agent_core.run import RunRequest, RunResult, RunStatus
from agent_core.run_prepare import prepare_run
from agent_core.run_state import Finish, RunState
from agent_core.run_tools import record_tool_span, run_tool_context
from agent_core.run_usage import (
    price_note,
    record_tokens,
    release_call,
    reserve_call,
    settle_call,
    usage_stop,
)
from agent_core.sanitize import sanitize_output
from agent_core.settings import AgentSettings
from agent_core.store import SessionStore, TraceStore
from agent_core.tool_exec import ToolBudget, ToolOutcome, execute_tool_calls
from agent_core.tools.base import ToolRegistry
from agent_core.tracing import SpanKind, Trace, messages_as_json, new_trace, verbose_enabled
from agent_core.uncancellable import finish_despite_cancel
from agent_core.usage import UsageLimitReached, UsageMeter

log = structlog.get_logger(__name__)

MAX_ITERATIONS_REPLY = (
    "I stopped after {n} steps without reaching an answer. "
    "Please narrow the request or ask me to continue."
)


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
        fallback: Provider | None = None,
        hooks: Sequence[PreToolUseHook] = (),
        locks: SharedLocks | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        """``locks``: shared with the service's other processes (compaction, seeding).
        ``meter``: prices every model call and may refuse one (usage limits, budgets)."""
        self.meter = meter
        self.retry = retry or RetryPolicy()
        self.fallback = fallback  # tried, with the same retries, when the provider fails
        self.hooks = list(hooks)  # PreToolUse hooks, in order
        self.active_runs = 0  # runs of this agent in progress (the router reports it)
        self.settings = settings
        self.provider = provider
        self.tools = tools
        self.store = store
        self.traces = traces
        self.events = events
        self.workspaces = Workspaces(
            settings.workspace,
            settings.id,
            settings.agent_type,
            templates_dir=settings.bootstrap_templates,
            max_chars=settings.context_file_max_chars,
            locks=locks,
        )
        self.context = ContextBudget(
            settings, provider, store, self.workspaces, traces, locks=locks
        )

    @property
    def busy(self) -> bool:
        """Runs or background compactions of this loop are in progress."""
        return self.active_runs > 0 or self.context.compactor.pending

    async def aclose(self) -> None:
        """Cancel background compactions (shutdown); runs are the scheduler's business."""
        await self.context.compactor.aclose()

    async def run(self, request: RunRequest) -> RunResult:
        self.active_runs += 1
        try:
            return await self._run(request)
        finally:
            self.active_runs -= 1

    async def _run(self, request: RunRequest) -> RunResult:
        trace = new_trace(
            request.run_id,
            request.session_key,
            self.settings.id,
            parent_trace_id=request.parent_trace_id,
            parent_span_id=request.parent_span_id,
            cron_job=request.cron_job_id,
        )
        await self._emit(request, EventType.RUN_STARTED, message=request.message)
        state: RunState | None = None
        try:
            verdict = guard_input(
                request.message,
                self.settings.input_guard,
                run_id=request.run_id,
                session_key=request.session_key,
                user_id=request.user_id,
            )
            if verdict.blocked:  # refused before any model call; nothing is stored
                trace.root.attributes["stop_reason"] = "input_guard"
                trace.root.attributes["injection_patterns"] = list(verdict.patterns)
                refusal = RunResult(request.run_id, RunStatus.COMPLETED, content=BLOCKED_REPLY)
                return await self._finish(request, trace, refusal)
            state = await self._prepare(request, trace)
            content, status = await self._iterate(state)
            content = sanitize_output(content)
            # A run refused before its first model call did not start: nothing is stored.
            if status is not RunStatus.USAGE_LIMIT or state.metered:
                state.buffer.append(Message.assistant(content))
                await self.store.append_run(
                    request.session_key,
                    state.buffer,
                    run_id=request.run_id,
                    usage=state.usage,
                    model=self.settings.model,
                    provider=self.provider.name,
                )
                stored = [*state.stored, *state.buffer]
                await self.context.after_run(request, stored, state.summary, self.meter)
        except asyncio.CancelledError:
            trace.finish("cancelled")
            # The run's own task is being cancelled: the trace is still saved, to its end even
            # if a second cancel (shutdown) arrives meanwhile.
            await finish_despite_cancel(self._save_trace(trace), name="trace.save")
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
            error=state.stop_reason if status is RunStatus.USAGE_LIMIT else None,
        )
        record_tokens(trace, state.usage)
        if state.stop_reason:
            trace.error = state.stop_reason
        # A usage limit is not the agent's failure: its trace keeps its own status.
        failed = bool(state.stop_reason) and status is not RunStatus.USAGE_LIMIT
        return await self._finish(request, trace, result, error=failed)

    async def _finish(
        self, request: RunRequest, trace: Trace, result: RunResult, *, error: bool = False
    ) -> RunResult:
        reason = trace.error
        trace.finish("error" if error else str(result.status), output=result.content, error=reason)
        await self._emit(
            request, EventType.RUN_COMPLETED, content=result.content, usage=result.usage.as_dict()
        )
        await self._save_trace(trace)
        return result

    async def _prepare(self, request: RunRequest, trace: Trace) -> RunState:
        """Workspace, prompt and first messages (``run_prepare.py``)."""
        tools, workspaces = self.tools, self.workspaces
        pricing = await price_note(self.meter, self.provider.name, self.settings.model)
        return await prepare_run(
            self.settings, tools, workspaces, self.store, request, trace, pricing=pricing
        )

    async def _iterate(self, state: RunState) -> tuple[str, RunStatus]:
        cap = state.request.max_iterations or self.settings.max_iterations
        try:
            for iteration in range(1, cap + 1):
                state.iterations = iteration
                step = await self._think_act_observe(state, iteration)
                if isinstance(step, Finish):
                    return step.content, step.status
            raise MaxIterationsExceeded(cap)
        except MaxIterationsExceeded as exc:
            log.warning("run.max_iterations", run_id=state.request.run_id, cap=exc.max_iterations)
            state.trace.root.attributes["stop_reason"] = str(exc)
            return MAX_ITERATIONS_REPLY.format(n=exc.max_iterations), RunStatus.MAX_ITERATIONS

    async def _think_act_observe(self, state: RunState, iteration: int) -> Finish | None:
        request = state.request
        if (stop := await self._fit_context(state, iteration)) is not None:
            return stop
        await self._emit(request, EventType.ACTIVITY, phase="thinking", iteration=iteration)
        try:
            response = await self._call_model(state, iteration)
        except UsageLimitReached as exc:
            return usage_stop(state, exc)
        await self.context.calibrate(state.messages, response.usage.input_tokens)
        if not response.tool_calls:
            return Finish(response.content)

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

    async def _fit_context(self, state: RunState, iteration: int) -> Finish | None:
        """Prune, compact mid-loop (once per run), and stop cleanly when still over budget."""
        compact = not state.compacted
        fit = await self.context.fit(
            state.messages, allow_compaction=compact, meter=self.meter, request=state.request
        )
        if fit.compaction_error is not None or fit.compacted:
            await self._emit(
                state.request, EventType.ACTIVITY, phase="compacting", iteration=iteration
            )
            span = state.trace.start_span(
                SpanKind.EVENT, "mid_loop_compaction", iteration=iteration
            )
            span.end(error=not fit.compacted, compacted=fit.compacted, reason=fit.compaction_error)
            state.compacted = state.compacted or fit.compacted
        state.messages = fit.messages
        if not fit.exceeded:
            return None
        log.warning("run.context_budget_exceeded", run_id=state.request.run_id, tokens=fit.tokens)
        state.stop_reason = "context_budget_exceeded"
        state.trace.root.attributes["stop_reason"] = state.stop_reason
        return Finish(BUDGET_EXCEEDED_REPLY, RunStatus.BUDGET_EXCEEDED)

    async def _call_model(self, state: RunState, iteration: int) -> ModelResponse:
        """One model call with retries; when it fails for good, the same on the fallback."""
        model_request = ModelRequest(
            model=self.settings.model,
            messages=state.messages,
            tools=self.tools.specs(state.discovered),
            stream=state.request.stream and self.settings.stream,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
        )
        try:
            return await self._call_with_fallback(state, iteration, model_request)
        except ProviderError as exc:
            if not _refuses_images(exc, state.messages):
                raise
            # A model without vision answers 4xx to image parts: the images become their
            # notes (the saved paths) for the rest of the run, and the call is made again.
            log.warning(
                "provider.images_refused",
                run_id=state.request.run_id,
                provider=self.provider.name,
                error=str(exc)[:200],
            )
            state.messages = [m.with_image_notes() for m in state.messages]
            without = replace(model_request, messages=state.messages)
            return await self._call_with_fallback(state, iteration, without)

    async def _call_with_fallback(
        self, state: RunState, iteration: int, model_request: ModelRequest
    ) -> ModelResponse:
        try:
            return await self._call_provider(state, iteration, self.provider, model_request)
        except ProviderError as exc:
            if self.fallback is None:
                raise
            log.warning(
                "provider.fallback",
                run_id=state.request.run_id,
                primary=self.provider.name,
                fallback=self.fallback.name,
                error=str(exc)[:200],
            )
            model = self.settings.fallback_model or self.settings.model
            fallback_request = replace(model_request, model=model)
            return await self._call_provider(state, iteration, self.fallback, fallback_request)

    async def _call_provider(
        self, state: RunState, iteration: int, provider: Provider, model_request: ModelRequest
    ) -> ModelResponse:
        request = state.request
        ticket = await reserve_call(
            self.meter, state, iteration, provider.name, model_request, self.context
        )
        span = state.trace.start_span(
            SpanKind.LLM,
            f"{provider.name}/{model_request.model}",
            provider=provider.name,
            model=model_request.model,
            iteration=iteration,
        )
        if verbose_enabled():
            span.attributes["input_preview"] = messages_as_json(model_request.messages)
            state.trace.root.attributes.setdefault(
                "input_preview", span.attributes["input_preview"]
            )
        streamed_thinking = False

        async def on_delta(delta: Delta) -> None:
            nonlocal streamed_thinking
            if delta.kind == "thinking":
                streamed_thinking = True
            kind = EventType.CHUNK if delta.kind == "text" else EventType.THINKING
            await self._emit(request, kind, content=delta.content)

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
                lambda: provider.complete(model_request, on_delta), self.retry, on_retry
            )
        except BaseException as exc:
            span.end(error=True, error_message=str(exc)[:500])
            await release_call(self.meter, ticket)
            raise
        await settle_call(self.meter, ticket, state, span, response.usage)
        if response.thinking and not streamed_thinking:
            # Not streamed (or a server that sends reasoning only at the end): one event.
            await self._emit(request, EventType.THINKING, content=response.thinking)
        state.usage.add(response.usage)
        span.end(
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cached_input_tokens=response.usage.cached_input_tokens,
            cache_write_tokens=response.usage.cache_write_tokens,
            tool_calls=len(response.tool_calls),
        )
        return response

    async def _run_tools(self, state: RunState, calls: list[ToolCall]) -> list[ToolOutcome]:
        request = state.request
        ctx = run_tool_context(self.settings, state)

        async def before(call: ToolCall) -> None:
            try:
                arguments: Any = call.parsed_arguments()
            except ValueError:
                arguments = call.arguments
            await self._emit(
                request, EventType.TOOL_CALL, name=call.name, id=call.id, arguments=arguments
            )

        async def after(outcome: ToolOutcome) -> None:
            record_tool_span(state.trace, self.tools, outcome)
            await self._emit(
                request,
                EventType.TOOL_RESULT,
                name=outcome.call.name,
                id=outcome.call.id,
                is_error=outcome.is_error,
                result=outcome.content,
            )

        if state.budget is None:
            state.budget = ToolBudget(self.settings.max_tool_calls)
        return await execute_tool_calls(
            calls,
            self.tools,
            ctx,
            before=before,
            after=after,
            hooks=self.hooks,
            budget=state.budget,
            max_parallel=self.settings.max_parallel_tools,
            max_parallel_children=self.settings.max_parallel_children,
        )

    async def _fail(
        self, request: RunRequest, trace: Trace, exc: BaseException, state: RunState | None
    ) -> RunResult:
        usage = state.usage if state else Usage()
        log.warning("run.failed", run_id=request.run_id, error=str(exc), kind=type(exc).__name__)
        record_tokens(trace, usage)
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


_IMAGE_REFUSAL_STATUSES = frozenset({400, 415, 422})


def _refuses_images(exc: ProviderError, messages: list[Message]) -> bool:
    return exc.status_code in _IMAGE_REFUSAL_STATUSES and any(m.images for m in messages)
