"""What the loop does to keep a run's request inside the context window.

Before every model call (:meth:`ContextBudget.fit`): prune old tool results, compact mid-loop
once per run when the request reaches the trigger share, and report when the request is still
over budget after all that. After a call: calibrate the token counter with the provider's
reported prompt tokens. After a run (:meth:`ContextBudget.after_run`): start post-run
compaction (memory flush, then summary) in the background when the session is large.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent_core.bootstrap import PromptMode, Workspaces
from agent_core.compaction import Compactor, NotCompacted, compact_messages, compact_session
from agent_core.locks import SharedLocks
from agent_core.memory_flush import run_memory_flush
from agent_core.messages import Message
from agent_core.metered_provider import metered
from agent_core.providers.base import Provider
from agent_core.pruning import could_prune, prune_context
from agent_core.run import RunRequest
from agent_core.settings import AgentSettings
from agent_core.store import SessionStore, TraceStore
from agent_core.tokens import TokenCounter, byte_bound, get_encoder
from agent_core.tracing import SpanKind, Trace, new_trace
from agent_core.usage import UsageLimitReached, UsageMeter

log = structlog.get_logger(__name__)

BUDGET_EXCEEDED_REPLY = (
    "This conversation no longer fits in my context window (context budget exceeded), even "
    "after trimming and summarizing it. Please start a new conversation with /reset, or ask "
    "for a smaller piece of work."
)


@dataclass(slots=True)
class FitResult:
    messages: list[Message]
    tokens: int | None  # None: surely under every threshold, so not counted
    pruned: int = 0
    compacted: bool = False
    compaction_error: str | None = None
    exceeded: bool = False


class ContextBudget:
    def __init__(
        self,
        settings: AgentSettings,
        provider: Provider,
        store: SessionStore,
        workspaces: Workspaces,
        traces: TraceStore | None = None,
        locks: SharedLocks | None = None,
    ) -> None:
        self.settings = settings
        self.traces = traces  # post-run compactions are saved as traces of their own
        self.provider = provider
        self.store = store
        self.workspaces = workspaces
        self.compactor = Compactor(settings.compaction, locks)
        self._counters: dict[str, TokenCounter] = {}
        self._flushed: dict[str, str | None] = {}  # session -> summary at its last flush

    def deferred_counter(self, model: str | None = None) -> TokenCounter:
        """The counter for ``model``, its encoding maybe not loaded yet (agent_core.tokens)."""
        key = f"{self.provider.name}/{model or self.settings.model}"
        counter = self._counters.get(key)
        if counter is None:
            counter = TokenCounter(model or self.settings.model, deferred=True)
            self._counters[key] = counter
        return counter

    async def counter(self, model: str | None = None) -> TokenCounter:
        """The counter for ``model`` (encoding loaded off the event loop the first time)."""
        counter = self.deferred_counter(model)
        if not counter.loaded:
            encoder = await asyncio.to_thread(get_encoder, counter.model)
            counter.load(encoder)  # a no-op when a concurrent call loaded it first
        return counter

    @property
    def limit(self) -> int:
        """Tokens a request may use: the window minus what the answer may take."""
        return max(self.settings.context_window - (self.settings.max_tokens or 0), 1)

    def _thresholds(self, allow_compaction: bool) -> tuple[float, float]:
        """The fewest tokens at which :meth:`fit` does anything but pass the messages on: with
        pruning's first pass, and without it (for messages it could not change anyway)."""
        window = self.settings.context_window
        thresholds = [self.limit + 1.0]  # over budget
        if allow_compaction and self.settings.compaction.enabled:
            thresholds.append(self.compactor.token_trigger(window))
        without_pruning = min(thresholds)
        if not (self.settings.pruning.enabled and window > 0):
            return without_pruning, without_pruning
        soft_trim = window * self.settings.pruning.soft_trim_ratio
        return min(without_pruning, soft_trim), without_pruning

    async def fit(
        self,
        messages: list[Message],
        *,
        allow_compaction: bool,
        meter: UsageMeter | None = None,
        request: RunRequest | None = None,
    ) -> FitResult:
        """``meter``: a mid-loop summary is accounted to ``request``'s run (and a limit may
        refuse it: then nothing is compacted)."""
        # The ceiling decides whenever it can, loaded encoding or not: once a usage limit has
        # loaded it, counting every message of every call exactly cost more than half of a
        # text reply's CPU (benchmarks/serve.py --all-capabilities), for the same decision.
        lowest, unprunable = self._thresholds(allow_compaction)
        ceiling = self.deferred_counter().ceiling(messages, below=lowest)
        if ceiling < lowest:
            return FitResult(list(messages), None)  # what exact counting would decide too
        # Pruning only shortens long tool results: without one (a chat, short tool answers)
        # its thresholds decide nothing, and the encoding (25-47 MiB, agent_core/tokens.py)
        # waits for compaction's, 2.5 times further into the conversation by default.
        if ceiling < unprunable and not could_prune(messages, self.settings.pruning):
            return FitResult(list(messages), None)
        counter = await self.counter()
        window = self.settings.context_window
        pruned = prune_context(
            messages, budget=window, count=counter.count, settings=self.settings.pruning
        )
        tokens = counter.count(pruned.messages)
        result = FitResult(pruned.messages, tokens)
        result.pruned = pruned.soft_trimmed + pruned.hard_cleared
        trigger = self.compactor.token_trigger(window)
        if allow_compaction and self.settings.compaction.enabled and tokens >= trigger:
            try:
                provider = metered(self.provider, meter, request, self)
                result.messages = await compact_messages(
                    result.messages, provider, self.settings.model, self.settings.compaction
                )
                result.compacted = True
                result.tokens = tokens = counter.count(result.messages)
            except (NotCompacted, TimeoutError, UsageLimitReached) as exc:
                result.compaction_error = str(exc) or type(exc).__name__
                log.info("compaction.mid_loop_skipped", reason=result.compaction_error)
        result.exceeded = tokens > self.limit
        return result

    async def calibrate(self, messages: Sequence[Message], prompt_tokens: int) -> None:
        self.deferred_counter().calibrate(messages, prompt_tokens)  # kept until loaded

    async def after_run(
        self,
        request: RunRequest,
        stored: Sequence[Message],
        summary: str | None,
        meter: UsageMeter | None = None,
    ) -> bool:
        """Start post-run compaction when the session is over a threshold; True if started.
        ``meter``: its model calls (memory flush, summary) are accounted to ``request``'s run."""
        if not await self._should_compact(stored, summary):
            return False
        workspace = self.workspaces.user_dir(request.user_id)
        provider = metered(self.provider, meter, request, self)

        trace = new_trace(f"{request.run_id}:compaction", request.session_key, self.settings.id)
        trace.root.attributes.update(kind="post_run_compaction", run_id=request.run_id)

        async def flush(messages: list[Message]) -> None:
            span = trace.start_span(SpanKind.EVENT, "memory_flush", messages=len(messages))
            files = await asyncio.to_thread(
                self.workspaces.context_files, request.user_id, PromptMode.MINIMAL
            )
            result = await run_memory_flush(
                provider=provider,
                settings=self.settings,
                request=request,
                workspace=workspace,
                messages=messages,
                files=files,
            )
            if result.usage is not None:
                trace.input_tokens += result.usage.input_tokens
                trace.output_tokens += result.usage.output_tokens
            span.end(
                error=bool(result.error or result.timed_out),
                iterations=result.iterations,
                tool_calls=result.tool_calls,
                silent=result.silent,
                timed_out=result.timed_out,
                reason=result.error,
            )

        async def work() -> None:
            span = trace.start_span(SpanKind.EVENT, "post_run_compaction")
            try:
                removed = await compact_session(
                    self.store,
                    request.session_key,
                    provider,
                    self.settings.model,
                    self.settings.compaction,
                    flush=flush,
                    flushed=self._flushed,
                )
            except UsageLimitReached as exc:  # as if there were nothing to summarize yet
                span.end(compacted=False, reason=exc.reason)
                trace.finish("not_compacted", error=exc.reason)
                raise NotCompacted(exc.reason) from exc
            except NotCompacted as exc:
                span.end(compacted=False, reason=str(exc))
                trace.finish("not_compacted", error=str(exc))
                raise
            except asyncio.CancelledError:
                span.end(error=True, compacted=False, reason="cancelled")
                trace.finish("cancelled")
                raise
            except Exception as exc:
                span.end(error=True, compacted=False, reason=str(exc)[:500])
                trace.finish("error", error=f"{type(exc).__name__}: {exc}")
                raise
            else:
                span.end(compacted=True, removed=removed)
                trace.finish("completed", output=f"compacted: {removed} messages summarized")
            finally:
                await self._save_trace(trace)

        return self.compactor.try_start(request.session_key, work)

    async def _save_trace(self, trace: Trace) -> None:
        if self.traces is None:
            return
        try:
            await self.traces.save_trace(trace)
        except Exception:  # a trace is never worth failing compaction for
            log.exception("trace.save_failed", trace_id=trace.id)

    async def _should_compact(self, stored: Sequence[Message], summary: str | None) -> bool:
        """The compactor's test, counting only when the message count alone does not decide."""
        window = self.settings.context_window
        if self.compactor.too_many_messages(len(stored)):
            return True
        # should_compact grows with the tokens: no at the ceiling is no at the exact count.
        summary_bound = byte_bound(summary or "")
        trigger = self.compactor.token_trigger(window) - summary_bound
        ceiling = self.deferred_counter().ceiling(stored, below=trigger) + summary_bound
        if not self.compactor.should_compact(len(stored), ceiling, window):
            return False
        counter = await self.counter()
        tokens = counter.count(stored) + (counter.count_text(summary) if summary else 0)
        return self.compactor.should_compact(len(stored), tokens, window)

    def workspace_for(self, user_id: str) -> Path:
        return self.workspaces.user_dir(user_id)
