"""The evolution records: AgentMetrics' derived rates and quality score, its JSON form, a
suggestion's change described in one line, and a cycle report's JSON form."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.evolution.records import (
    AgentMetrics,
    ChangeKind,
    CycleReport,
    Suggestion,
    SuggestionStatus,
    ToolStats,
    describe_change,
)

START = datetime(2026, 12, 1, tzinfo=UTC)
END = datetime(2026, 12, 8, tzinfo=UTC)


def metrics(**fields: Any) -> AgentMetrics:
    return AgentMetrics("main", START, END, **fields)


def suggestion(change: dict[str, Any], sid: str = "s1") -> Suggestion:
    return Suggestion(
        id=sid,
        agent_id="main",
        rule="ToolFailureRule",
        status=SuggestionStatus.PENDING,
        evidence={},
        change=change,
        summary="",
        created_at=START,
        decided_by=None,
        decided_at=None,
        applied_at=None,
        baseline=None,
        outcome=None,
    )


class TestMetrics:
    def test_empty_window(self) -> None:
        m = metrics()
        assert (m.tool_calls, m.tool_errors, m.tool_error_rate) == (0, 0, 0.0)
        assert m.success_rate == 1.0 and m.memory_search_per_run == 0.0 and m.quality == 1.0
        assert ToolStats(0, 0).error_rate == 0.0

    def test_tool_totals(self) -> None:
        m = metrics(tools={"a": ToolStats(10, 1), "b": ToolStats(30, 9)})
        assert (m.tool_calls, m.tool_errors) == (40, 10)
        assert m.tool_error_rate == pytest.approx(0.25)
        assert m.tools["b"].error_rate == pytest.approx(0.3)

    def test_cancelled_runs_are_not_judged(self) -> None:
        m = metrics(runs=10, completed=6, failures=2, cancellations=2)
        assert m.success_rate == pytest.approx(6 / 8)
        only_stopped = metrics(runs=3, completed=0, cancellations=3)
        assert only_stopped.success_rate == 1.0

    def test_quality_is_success_times_tool_reliability(self) -> None:
        m = metrics(runs=10, completed=8, tools={"a": ToolStats(20, 5)})
        assert m.quality == pytest.approx(0.8 * 0.75)
        assert 0.0 <= metrics(runs=4, completed=0, tools={"a": ToolStats(1, 1)}).quality == 0.0

    def test_memory_search_per_run(self) -> None:
        assert metrics(runs=4, memory_search_calls=6).memory_search_per_run == 1.5

    def test_as_dict(self) -> None:
        m = metrics(
            runs=3,
            completed=2,
            failures=1,
            capped=1,
            tools={"z": ToolStats(3, 1), "a": ToolStats(2, 0)},
            repeated_tool_calls=4,
            runs_with_repeats=2,
            repeated_by_tool={"z": 3, "a": 1},
            memory_search_calls=1,
            input_tokens=100,
            output_tokens=50,
            latency_p50_ms=12.345,
            latency_p95_ms=99.99,
        )
        data = m.as_dict()
        assert data["window_start"] == "2026-12-01T00:00:00+00:00"
        assert data["window_end"] == "2026-12-08T00:00:00+00:00"
        assert data["success_rate"] == 0.6667
        assert list(data["tools"]) == ["a", "z"]
        assert data["tools"]["z"] == {"calls": 3, "errors": 1, "error_rate": 0.3333}
        assert list(data["repeated_by_tool"]) == ["a", "z"]
        assert (data["tool_calls"], data["tool_error_rate"]) == (5, 0.2)
        assert data["memory_search_per_run"] == 0.3333
        assert (data["latency_p50_ms"], data["latency_p95_ms"]) == (12.3, 100.0)
        assert data["quality"] == round(2 / 3 * 0.8, 4)
        assert (data["capped"], data["input_tokens"], data["output_tokens"]) == (1, 100, 50)


class TestDescribeChange:
    @pytest.mark.parametrize(
        ("change", "text"),
        [
            (
                {"kind": "param", "param": "max_iterations", "from": 20, "to": 22},
                "max_iterations 20 → 22",
            ),
            ({"kind": "prompt", "append": "Be brief."}, "append to system_prompt: 'Be brief.'"),
            (
                {"kind": "prompt", "target": "extra_context", "append": "x"},
                "append to extra_context: 'x'",
            ),
            ({"kind": "tool_policy", "disable": ["a", "b"]}, "disable tool(s) a, b"),
            ({"kind": "other"}, "{'kind': 'other'}"),
        ],
    )
    def test_one_line(self, change: dict[str, Any], text: str) -> None:
        assert describe_change(change) == text

    def test_suggestion_describes_its_change_and_kind(self) -> None:
        s = suggestion({"kind": "tool_policy", "disable": ["web_fetch"]})
        assert s.describe_change() == "disable tool(s) web_fetch"
        assert s.change_kind is ChangeKind.TOOL_POLICY
        with pytest.raises(ValueError):
            _ = suggestion({"kind": "other"}).change_kind

    def test_suggestion_is_frozen(self) -> None:
        s = suggestion({"kind": "prompt", "append": "x"})
        with pytest.raises(AttributeError):
            s.status = SuggestionStatus.APPLIED  # type: ignore[misc]


def test_statuses_and_kinds_are_their_stored_strings() -> None:
    assert SuggestionStatus("rolled_back") is SuggestionStatus.ROLLED_BACK
    assert ChangeKind("tool_policy") is ChangeKind.TOOL_POLICY
    assert f"{ChangeKind.TOOL_POLICY}" == "tool_policy"


def test_cycle_report_as_dict() -> None:
    report = CycleReport(
        started_at=START,
        finished_at=END,
        agents=("main", "b"),
        created=(suggestion({"kind": "prompt", "append": "x"}, "s1"),),
        skipped=("main/RepeatedToolRule: locked",),
        kept=("s0",),
        rolled_back=("s9",),
        errors=("boom",),
    )
    assert report.as_dict() == {
        "started_at": START.isoformat(),
        "finished_at": END.isoformat(),
        "agents": ["main", "b"],
        "created": ["s1"],
        "skipped": ["main/RepeatedToolRule: locked"],
        "kept": ["s0"],
        "rolled_back": ["s9"],
        "errors": ["boom"],
    }
    empty = CycleReport(START, END).as_dict()
    assert empty["created"] == [] and empty["agents"] == []
