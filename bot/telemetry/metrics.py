"""This process's metrics, served as Prometheus text by ``GET /metrics`` (docs/metrics.md).

What a reply adds is a few dictionary updates: turns, runs, model calls, tool calls and tokens
are tallied in plain dicts keyed by their label values, on the event loop (one thread, so no
locks). prometheus-client's metric objects would take a lock and a label lookup per update
and cost start-up ~50 ms of imports; instead it is imported at the first scrape, and a
collector turns the tallies into metric families there, so the text format is still the
library's. What is a state rather than an event (active runs, the inbox, channels) is read at
scrape time, never per message.

Each process counts only what it did itself: with several processes (``redis.url``) each one
is scraped on its own and Prometheus adds them up.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core import SpanKind, Trace

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

PREFIX = "loopgate_"
RUN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds; a run is one or more model calls plus tools, so up to minutes."""
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Seconds of one model call, retries included (the LLM span)."""
COMPACTION_KIND = "post_run_compaction"  # the root of a compaction's own trace: not a run


class TurnOutcome(enum.StrEnum):
    """How a message's turn ended, as ``loopgate_turns_total{outcome}`` counts it."""

    REPLY = "reply"  # an answer was sent
    NO_REPLY = "no_reply"  # NO_REPLY or an empty answer: nothing was sent, on purpose
    ERROR = "error"  # the run or the delivery failed (the apology, if any, was sent)
    STOPPED = "stopped"  # /stop or /stopall, running or still queued
    INTERRUPTED = "interrupted"  # replaced by a newer message (bot.queue_mode: interrupt)
    DROPPED = "dropped"  # never run: the chat's queue was full (bot.queue_cap)
    HANDED_OVER = "handed_over"  # shutdown or a lost lease: another process answers it


class ToolOutcome(enum.StrEnum):
    OK = "ok"
    ERROR = "error"
    BLOCKED = "blocked"  # refused by a PreToolUse hook or a budget: the tool did not run


@dataclass(slots=True)
class Histogram:
    """Observations per label values: a count per bucket (the last one is +Inf) and a sum."""

    bounds: tuple[float, ...]
    series: dict[tuple[str, ...], list[float]] = field(default_factory=dict)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        row = self.series.get(labels)
        if row is None:
            # One slot per bucket, +Inf included, then the sum.
            row = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        row[bisect_left(self.bounds, value)] += 1  # first bound >= value: Prometheus' ``le``
        row[-1] += value

    def cumulative(self, row: list[float]) -> list[tuple[str, float]]:
        """``row``'s buckets as Prometheus has them: ``le`` bounds, counts summed up."""
        buckets, total = [], 0.0
        for bound, count in zip((*self.bounds, float("inf")), row[:-1], strict=True):
            total += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return buckets


@dataclass(frozen=True, slots=True)
class ScrapeState:
    """What is read when ``/metrics`` is asked, not counted as it happens."""

    active_runs: int = 0
    sessions_waiting: int = 0
    """Sessions with a job ready to run but for ``bot.max_concurrent_runs``."""
    channels: Mapping[str, bool] = field(default_factory=dict)
    """Each channel this process started: up or not."""
    inbox_depth: Mapping[str, int] | None = None
    """Pending inbox entries by state (queued, running); None: no inbox, or unreadable."""
    inbox_oldest_age: float | None = None
    """Seconds since the oldest pending entry was stored; None: nothing pending."""
    spans_exported: Mapping[str, int] | None = None
    """Spans handed to the OTLP collector by outcome; None: tracing.otlp is off."""


def _bump(tally: dict[tuple[str, ...], float], key: tuple[str, ...], by: float = 1) -> None:
    tally[key] = tally.get(key, 0) + by


class Metrics:
    """The counters and histograms of one process; :meth:`render` is the scrape."""

    def __init__(self) -> None:
        self.turns: dict[tuple[str, ...], float] = {}
        self.tool_calls: dict[tuple[str, ...], float] = {}
        self.tokens: dict[tuple[str, ...], float] = {}
        self.cost_usd: dict[tuple[str, ...], float] = {}
        self.run_seconds = Histogram(RUN_BUCKETS)
        self.llm_seconds = Histogram(LLM_BUCKETS)
        self._registry: CollectorRegistry | None = None
        self._scrape = ScrapeState()

    def turn_ended(self, channel: str, outcome: TurnOutcome) -> None:
        _bump(self.turns, (channel, outcome.value))

    def observe_llm_usage(
        self,
        agent: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """One model call's usage; ``cost_usd`` None when its price is not known (then only
        the tokens count)."""
        if input_tokens:
            _bump(self.tokens, (agent, model, "input"), input_tokens)
        if output_tokens:
            _bump(self.tokens, (agent, model, "output"), output_tokens)
        if cached_tokens:
            _bump(self.tokens, (agent, model, "cached"), cached_tokens)
        if cost_usd is not None:
            _bump(self.cost_usd, (agent, model), cost_usd)

    def observe_trace(self, trace: Trace) -> None:
        """A finished run's trace (or a compaction's): its duration, each model call's latency
        and usage, each tool call's outcome."""
        agent = trace.agent_id
        for span in trace.spans:
            kind = span.kind
            attributes = span.attributes
            if kind is SpanKind.LLM:
                model = str(attributes.get("model", ""))
                outcome = "ok"
                if span.error:
                    # The call the run was stopped in ends without an error message.
                    stopped = trace.status == "cancelled" and not attributes.get("error_message")
                    outcome = "cancelled" if stopped else "error"
                labels = (str(attributes.get("provider", "")), model, outcome)
                self.llm_seconds.observe(labels, span.duration_ms / 1000)
                # Priced by the usage accounting (bot/usage): ``cost_usd`` is None for a model
                # whose price is unknown, and then only the tokens count.
                cost = attributes.get("cost_usd")
                self.observe_llm_usage(
                    agent,
                    model,
                    _int(attributes.get("input_tokens")),
                    _int(attributes.get("output_tokens")),
                    _int(attributes.get("cached_input_tokens")),
                    float(cost) if isinstance(cost, int | float) else None,
                )
            elif kind is SpanKind.TOOL or kind is SpanKind.ASYNC_TOOL:
                tool = ToolOutcome.OK
                if attributes.get("blocked"):
                    tool = ToolOutcome.BLOCKED
                elif span.error:
                    tool = ToolOutcome.ERROR
                _bump(self.tool_calls, (span.name, tool.value))
        if trace.spans and trace.root.attributes.get("kind") != COMPACTION_KIND:
            self.run_seconds.observe((agent, trace.status), trace.root.duration_ms / 1000)

    def render(self, scrape: ScrapeState) -> bytes:
        """The Prometheus text exposition (format 0.0.4) of everything, ``scrape`` included."""
        from prometheus_client.exposition import generate_latest

        self._scrape = scrape
        return generate_latest(self._registry_for_scrapes())

    def _registry_for_scrapes(self) -> CollectorRegistry:
        if self._registry is None:
            from prometheus_client import ProcessCollector
            from prometheus_client.registry import CollectorRegistry

            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Collector(self))
            # CPU seconds, memory, open files of this process, under our prefix.
            ProcessCollector(namespace=PREFIX.rstrip("_"), registry=registry)
            self._registry = registry
        return self._registry

    def families(self) -> Iterator[Any]:
        """The metric families of a scrape (prometheus-client ``Metric`` objects)."""
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        def counter(name: str, doc: str, labels: list[str], tally: dict[Any, float]) -> Any:
            family = CounterMetricFamily(PREFIX + name, doc, labels=labels)
            for key, value in tally.items():
                family.add_metric(list(key), value)
            return family

        def histogram(name: str, doc: str, labels: list[str], h: Histogram) -> Any:
            family = HistogramMetricFamily(PREFIX + name, doc, labels=labels)
            for key, row in h.series.items():
                family.add_metric(list(key), h.cumulative(row), row[-1])
            return family

        scrape = self._scrape
        yield counter(
            "turns",
            "Messages' turns ended, by channel and outcome "
            "(reply, no_reply, error, stopped, interrupted, dropped, handed_over).",
            ["channel", "outcome"],
            self.turns,
        )
        yield histogram(
            "run_duration_seconds",
            "Agent runs (model calls and tools, from the run's trace) by agent and status.",
            ["agent", "status"],
            self.run_seconds,
        )
        yield histogram(
            "llm_duration_seconds",
            "Model calls, retries included, by provider, model and outcome (ok, error, cancelled).",
            ["provider", "model", "outcome"],
            self.llm_seconds,
        )
        yield counter(
            "tool_calls",
            "Tool calls by tool and outcome (ok, error, blocked).",
            ["tool", "outcome"],
            self.tool_calls,
        )
        yield counter(
            "llm_tokens",
            "Tokens of model calls by agent, model and kind (input, output, cached).",
            ["agent", "model", "kind"],
            self.tokens,
        )
        yield counter(
            "cost_usd",
            "Cost of model calls in US dollars by agent and model (calls with a known price).",
            ["agent", "model"],
            self.cost_usd,
        )
        yield GaugeMetricFamily(
            PREFIX + "active_runs", "Runs in progress in this process.", scrape.active_runs
        )
        yield GaugeMetricFamily(
            PREFIX + "sessions_waiting_for_run_slot",
            "Sessions in this process whose next run waits for bot.max_concurrent_runs.",
            scrape.sessions_waiting,
        )
        up = GaugeMetricFamily(
            PREFIX + "channel_up", "1 when the channel is up, 0 otherwise.", labels=["channel"]
        )
        for name, is_up in sorted(scrape.channels.items()):
            up.add_metric([name], 1.0 if is_up else 0.0)
        yield up
        if scrape.inbox_depth is not None:
            depth = GaugeMetricFamily(
                PREFIX + "inbox_depth",
                "Inbox entries waiting for or getting an answer, by state (the whole service's "
                "inbox: every process reports the same).",
                labels=["state"],
            )
            for state, count in sorted(scrape.inbox_depth.items()):
                depth.add_metric([state], count)
            yield depth
            yield GaugeMetricFamily(
                PREFIX + "inbox_oldest_age_seconds",
                "Seconds since the oldest pending inbox entry was stored (0: none pending).",
                scrape.inbox_oldest_age or 0.0,
            )
        if scrape.spans_exported is not None:
            spans = CounterMetricFamily(
                PREFIX + "otlp_spans",
                "Spans sent to the OTLP collector (tracing.otlp) by outcome (exported, failed).",
                labels=["outcome"],
            )
            for outcome, count in sorted(scrape.spans_exported.items()):
                spans.add_metric([outcome], count)
            yield spans


class _Collector:
    """prometheus-client's collector interface over :class:`Metrics`."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        return self._metrics.families()


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
