"""What the evolution engine works with: an agent's metrics, a suggestion and its history.

Plain frozen dataclasses, shared by the service, the CLI and the admin dashboard. A
suggestion's ``change`` is one of:

- ``{"kind": "param", "param": "max_iterations", "from": 20, "to": 22}``
- ``{"kind": "prompt", "target": "system_prompt", "append": "..."}``
- ``{"kind": "tool_policy", "disable": ["web_fetch"]}``
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class SuggestionStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"  # approved, being applied (a failed apply ends as FAILED)
    APPLIED = "applied"
    REJECTED = "rejected"
    ROLLED_BACK = "rolled_back"
    FAILED = "failed"


class ChangeKind(enum.StrEnum):
    PARAM = "param"
    PROMPT = "prompt"
    TOOL_POLICY = "tool_policy"


@dataclass(frozen=True, slots=True)
class ToolStats:
    calls: int
    errors: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class AgentMetrics:
    """One agent's runs in ``[window_start, window_end)``, from the ``traces``/``spans`` tables.

    ``runs`` counts finished runs (child runs included: they are the agent's work too);
    ``failures`` ended in an error, ``cancellations`` were stopped (/stop, shutdown), and
    ``capped`` hit max_iterations or the context budget. ``repeated_tool_calls`` counts calls
    that repeat an earlier call of the same run with the same tool and the same arguments.
    """

    agent_id: str
    window_start: datetime
    window_end: datetime
    runs: int = 0
    completed: int = 0
    failures: int = 0
    cancellations: int = 0
    capped: int = 0
    tools: dict[str, ToolStats] = field(default_factory=dict)
    repeated_tool_calls: int = 0
    runs_with_repeats: int = 0
    repeated_by_tool: dict[str, int] = field(default_factory=dict)
    memory_search_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0

    @property
    def tool_calls(self) -> int:
        return sum(s.calls for s in self.tools.values())

    @property
    def tool_errors(self) -> int:
        return sum(s.errors for s in self.tools.values())

    @property
    def tool_error_rate(self) -> float:
        calls = self.tool_calls
        return self.tool_errors / calls if calls else 0.0

    @property
    def success_rate(self) -> float:
        """Completed runs among those not stopped by a user (a /stop says nothing about
        quality); 1.0 without such runs."""
        judged = self.runs - self.cancellations
        return self.completed / judged if judged > 0 else 1.0

    @property
    def memory_search_per_run(self) -> float:
        return self.memory_search_calls / self.runs if self.runs else 0.0

    @property
    def quality(self) -> float:
        """The quality score rollbacks compare: success rate × (1 − tool error rate), in
        [0, 1]. Both a run that fails and a tool call that fails lower it."""
        return self.success_rate * (1.0 - self.tool_error_rate)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (stored as snapshots and baselines, served to the dashboard)."""
        return {
            "agent_id": self.agent_id,
            "window_start": self.window_start.isoformat(),
            "window_end": self.window_end.isoformat(),
            "runs": self.runs,
            "completed": self.completed,
            "failures": self.failures,
            "cancellations": self.cancellations,
            "capped": self.capped,
            "success_rate": round(self.success_rate, 4),
            "tools": {
                name: {"calls": s.calls, "errors": s.errors, "error_rate": round(s.error_rate, 4)}
                for name, s in sorted(self.tools.items())
            },
            "tool_calls": self.tool_calls,
            "tool_error_rate": round(self.tool_error_rate, 4),
            "repeated_tool_calls": self.repeated_tool_calls,
            "runs_with_repeats": self.runs_with_repeats,
            "repeated_by_tool": dict(sorted(self.repeated_by_tool.items())),
            "memory_search_calls": self.memory_search_calls,
            "memory_search_per_run": round(self.memory_search_per_run, 4),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_p50_ms": round(self.latency_p50_ms, 1),
            "latency_p95_ms": round(self.latency_p95_ms, 1),
            "quality": round(self.quality, 4),
        }


@dataclass(frozen=True, slots=True)
class Suggestion:
    id: str
    agent_id: str
    rule: str  # "LowRetrievalUsageRule" | "ToolFailureRule" | "RepeatedToolRule" | ...
    status: SuggestionStatus
    evidence: dict[str, Any]  # the metric values that fired the rule, the window, data points
    change: dict[str, Any]  # see the module docstring
    summary: str  # one human sentence for lists
    created_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    applied_at: datetime | None
    baseline: dict[str, Any] | None  # AgentMetrics.as_dict() at apply time
    outcome: str | None  # "kept: quality 0.93 vs baseline 0.95" / "rolled back: ..."
    reason: str = ""  # the reviewer's reason for a rejection
    previous: dict[str, Any] | None = None  # the stored value the change replaced (rollback)
    history: tuple[dict[str, Any], ...] = ()  # [{"at", "event", "by", "detail"}], oldest first
    updated_at: datetime | None = None

    @property
    def change_kind(self) -> ChangeKind:
        return ChangeKind(self.change["kind"])

    def describe_change(self) -> str:
        """The change in one line, e.g. ``max_iterations 20 → 22``."""
        return describe_change(self.change)


def describe_change(change: dict[str, Any]) -> str:
    kind = change.get("kind")
    if kind == ChangeKind.PARAM:
        return f"{change['param']} {change['from']} → {change['to']}"
    if kind == ChangeKind.PROMPT:
        return f"append to {change.get('target', 'system_prompt')}: {change['append']!r}"
    if kind == ChangeKind.TOOL_POLICY:
        return f"disable tool(s) {', '.join(change['disable'])}"
    return repr(change)


@dataclass(frozen=True, slots=True)
class CycleReport:
    """What one cycle did."""

    started_at: datetime
    finished_at: datetime
    agents: tuple[str, ...] = ()  # agents with runs in the window
    created: tuple[Suggestion, ...] = ()
    skipped: tuple[str, ...] = ()  # "agent/rule: why" for findings not turned into suggestions
    kept: tuple[str, ...] = ()  # ids of applied suggestions judged and kept
    rolled_back: tuple[str, ...] = ()  # ids rolled back this cycle
    errors: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "agents": list(self.agents),
            "created": [s.id for s in self.created],
            "skipped": list(self.skipped),
            "kept": list(self.kept),
            "rolled_back": list(self.rolled_back),
            "errors": list(self.errors),
        }
