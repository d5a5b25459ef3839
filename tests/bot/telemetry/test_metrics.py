"""bot/telemetry/metrics.py: what a trace and a turn add to the tallies, and the scrape as
prometheus-client's own parser reads it."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from agent_core import SpanKind, Trace
from agent_core.tracing import new_trace
from bot.telemetry.metrics import (
    Histogram,
    Metrics,
    ScrapeState,
    ToolOutcome,
    TurnOutcome,
)


def parsed(metrics: Metrics, scrape: ScrapeState | None = None) -> dict[str, Any]:
    """Family name -> {(sample name, sorted labels): value}."""
    text = metrics.render(scrape or ScrapeState()).decode()
    return {
        family.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        for family in text_string_to_metric_families(text)
    }


def run_trace(status: str = "completed", *, agent: str = "main") -> Trace:
    trace = new_trace("run", "agent:main:web:direct:u", agent)
    ok = trace.start_span(SpanKind.LLM, "openai/m", provider="openai", model="m", iteration=1)
    ok.end(input_tokens=100, output_tokens=10, tool_calls=3)
    ok.duration_ms = 400.0
    for error in (False, True):
        tool = trace.start_span(SpanKind.TOOL, "read_file", id=f"r{error}")
        tool.error = error
    blocked = trace.start_span(SpanKind.TOOL, "write_file", id="w")
    blocked.error, blocked.attributes["blocked"] = True, True
    spawn = trace.start_span(SpanKind.ASYNC_TOOL, "spawn", id="s")
    spawn.error = False
    failed = trace.start_span(SpanKind.LLM, "openai/m", provider="openai", model="m")
    failed.end(error=True, error_message="HTTP 500")
    trace.finish(status)
    trace.root.duration_ms = 1500.0
    return trace


class TestHistogram:
    def test_a_value_on_a_bound_counts_in_that_bucket_and_past_the_last_in_inf(self) -> None:
        h = Histogram((0.5, 1.0))
        for value in (0.5, 0.7, 1.0, 3.0):
            h.observe(("x",), value)
        row = h.series[("x",)]
        assert h.cumulative(row) == [("0.5", 1), ("1.0", 3), ("+Inf", 4)]
        assert row[-1] == 5.2


class TestObserveTrace:
    def test_a_run_adds_its_duration_model_calls_tools_and_tokens(self) -> None:
        metrics = Metrics()
        metrics.observe_trace(run_trace())
        assert metrics.run_seconds.series[("main", "completed")][-1] == 1.5
        llm = metrics.llm_seconds.series
        assert llm[("openai", "m", "ok")][-1] == 0.4
        assert sum(llm[("openai", "m", "error")][:-1]) == 1
        assert metrics.tool_calls == {
            ("read_file", ToolOutcome.OK): 1,
            ("read_file", ToolOutcome.ERROR): 1,
            ("write_file", ToolOutcome.BLOCKED): 1,
            ("spawn", ToolOutcome.OK): 1,
        }
        assert metrics.tokens == {("main", "m", "input"): 100, ("main", "m", "output"): 10}
        assert metrics.cost_usd == {}

    def test_the_usage_accountings_cost_and_cached_tokens_are_counted(self) -> None:
        trace = new_trace("run", "s", "main")
        priced = trace.start_span(SpanKind.LLM, "openai/m", provider="openai", model="m")
        priced.end(input_tokens=100, output_tokens=10, cached_input_tokens=40, cost_usd=0.25)
        unknown = trace.start_span(SpanKind.LLM, "local/x", provider="local", model="x")
        unknown.end(input_tokens=5, output_tokens=1, cached_input_tokens=0, cost_usd=None)
        trace.finish("completed")
        metrics = Metrics()
        metrics.observe_trace(trace)
        assert metrics.tokens[("main", "m", "cached")] == 40
        assert metrics.cost_usd == {("main", "m"): 0.25}  # the unpriced call adds tokens only
        assert metrics.tokens[("main", "x", "input")] == 5

    def test_the_model_call_a_stopped_run_was_in_is_cancelled_not_an_error(self) -> None:
        trace = new_trace("run", "s", "main")
        call = trace.start_span(SpanKind.LLM, "openai/m", provider="openai", model="m")
        call.end(error=True, error_message="")  # what a CancelledError leaves
        trace.finish("cancelled")
        metrics = Metrics()
        metrics.observe_trace(trace)
        assert list(metrics.llm_seconds.series) == [("openai", "m", "cancelled")]
        assert list(metrics.run_seconds.series) == [("main", "cancelled")]

    def test_a_compaction_trace_is_no_run(self) -> None:
        trace = new_trace("run:compaction", "s", "main")
        trace.root.attributes.update(kind="post_run_compaction")
        trace.finish("completed")
        metrics = Metrics()
        metrics.observe_trace(trace)
        assert metrics.run_seconds.series == {}


class TestUsage:
    def test_tokens_by_kind_and_cost_only_when_known(self) -> None:
        metrics = Metrics()
        metrics.observe_llm_usage("a", "m", 10, 2, cached_tokens=4, cost_usd=0.5)
        metrics.observe_llm_usage("a", "m", 5, 1, cost_usd=None)
        metrics.observe_llm_usage("b", "m", 0, 0, cost_usd=0.25)
        assert metrics.tokens == {
            ("a", "m", "input"): 15,
            ("a", "m", "output"): 3,
            ("a", "m", "cached"): 4,
        }
        assert metrics.cost_usd == {("a", "m"): 0.5, ("b", "m"): 0.25}


class TestRender:
    def test_every_family_is_prefixed_and_parses_with_its_values(self) -> None:
        metrics = Metrics()
        metrics.observe_trace(run_trace())
        metrics.turn_ended("telegram", TurnOutcome.REPLY)
        metrics.turn_ended("telegram", TurnOutcome.REPLY)
        metrics.turn_ended("slack", TurnOutcome.STOPPED)
        metrics.observe_llm_usage("main", "m", 0, 0, cost_usd=0.125)
        scrape = ScrapeState(
            active_runs=3,
            sessions_waiting=5,
            channels={"telegram": True, "zalo": False},
            inbox_depth={"queued": 4, "running": 2},
            inbox_oldest_age=12.5,
            spans_exported={"exported": 7, "failed": 1},
        )
        families = parsed(metrics, scrape)
        assert all(name.startswith("loopgate_") for name in families)
        turns = families["loopgate_turns"]
        assert turns[("loopgate_turns_total", (("channel", "telegram"), ("outcome", "reply")))] == 2
        assert turns[("loopgate_turns_total", (("channel", "slack"), ("outcome", "stopped")))] == 1
        runs = families["loopgate_run_duration_seconds"]
        run = (("agent", "main"), ("status", "completed"))
        assert runs[("loopgate_run_duration_seconds_count", run)] == 1
        bucket = "loopgate_run_duration_seconds_bucket"
        assert runs[(bucket, (("agent", "main"), ("le", "1.0"), ("status", "completed")))] == 0
        assert runs[(bucket, (("agent", "main"), ("le", "2.5"), ("status", "completed")))] == 1
        cost = families["loopgate_cost_usd"]
        assert cost[("loopgate_cost_usd_total", (("agent", "main"), ("model", "m")))] == 0.125
        assert families["loopgate_active_runs"] == {("loopgate_active_runs", ()): 3}
        waiting = "loopgate_sessions_waiting_for_run_slot"
        assert families[waiting] == {(waiting, ()): 5}
        assert families["loopgate_channel_up"] == {
            ("loopgate_channel_up", (("channel", "telegram"),)): 1,
            ("loopgate_channel_up", (("channel", "zalo"),)): 0,
        }
        depth = families["loopgate_inbox_depth"]
        assert depth[("loopgate_inbox_depth", (("state", "queued"),))] == 4
        assert families["loopgate_inbox_oldest_age_seconds"] == {
            ("loopgate_inbox_oldest_age_seconds", ()): 12.5
        }
        spans = families["loopgate_otlp_spans"]
        assert spans[("loopgate_otlp_spans_total", (("outcome", "failed"),))] == 1
        assert "loopgate_process_cpu_seconds" in families

    def test_without_an_inbox_or_export_their_families_are_left_out(self) -> None:
        families = parsed(Metrics())
        assert "loopgate_inbox_depth" not in families
        assert "loopgate_otlp_spans" not in families
        assert "loopgate_turns" in families and "loopgate_llm_duration_seconds" in families
