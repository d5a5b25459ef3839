"""The suggestion rules: each looks at one agent's metrics and may propose one change.

A rule only says what it would change and why (a :class:`Finding`); the service then applies
the guardrails (``min_data_points``, ``locked_params``, ``max_delta_per_cycle``) and drops
duplicates. Every threshold is a module constant, documented where it is defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.evolution.apply import AgentView
from bot.evolution.guardrails import PROMPT_TARGET, capped_target
from bot.evolution.metrics import MEMORY_SEARCH_TOOL
from bot.evolution.records import AgentMetrics, ChangeKind

# LowRetrievalUsageRule: fewer than one memory_search per 20 runs, although the agent's users
# have memory files to search, means memory is written but not read back.
LOW_RETRIEVAL_PER_RUN = 0.05
LOW_RETRIEVAL_MIN_MEMORY_FILES = 1
MEMORY_REMINDER = (
    "Before answering about earlier conversations, decisions, people or the user's "
    "preferences, call memory_search first: MEMORY.md and memory/*.md often hold the answer."
)

# ToolFailureRule: a tool whose calls fail 30% of the time or more, over at least 20 calls
# (fewer calls are too few to tell a broken tool from bad luck), is suggested for disabling.
TOOL_FAILURE_RATE = 0.30
TOOL_FAILURE_MIN_CALLS = 20

# RepeatedToolRule: identical calls (same tool, same arguments) repeated inside one run in at
# least 10% of the runs, and at least 10 repeated calls in all, look like a loop.
REPEATED_RUN_SHARE = 0.10
REPEATED_MIN_CALLS = 10
REPEAT_ADVICE = (
    "Do not call a tool again with the same arguments in one answer: reuse the result you "
    "already have. If it was not enough, change the arguments or tell the user what is missing."
)

# IterationLimitRule: 10% of the runs or more stopped at max_iterations while not looping
# (repeats below REPEATED_RUN_SHARE): the limit is too tight for the agent's work. It asks for
# 50% more; the guardrail's max_delta_per_cycle caps that.
ITERATION_CAPPED_SHARE = 0.10
ITERATION_WANTED_GROWTH = 1.5


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    change: dict[str, Any]
    summary: str
    evidence: dict[str, Any]


class Rule(Protocol):
    name: str

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        """Zero or more findings for the agent (guardrails not applied yet)."""
        ...


class LowRetrievalUsageRule:
    name = "LowRetrievalUsageRule"

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        if MEMORY_SEARCH_TOOL in agent.disabled_tools or not m.runs:
            return []
        if memory_files < LOW_RETRIEVAL_MIN_MEMORY_FILES:
            return []
        if m.memory_search_per_run >= LOW_RETRIEVAL_PER_RUN:
            return []
        if MEMORY_REMINDER in agent.system_prompt:
            return []  # already applied; the window still holds the runs from before
        evidence = {
            "memory_search_calls": m.memory_search_calls,
            "memory_search_per_run": round(m.memory_search_per_run, 4),
            "threshold_per_run": LOW_RETRIEVAL_PER_RUN,
            "memory_files": memory_files,
        }
        summary = (
            f"{agent.agent_id} searched its memory {m.memory_search_calls} times in {m.runs} "
            f"runs although {memory_files} memory files exist: remind it to use memory_search."
        )
        change = {"kind": str(ChangeKind.PROMPT), "target": PROMPT_TARGET}
        change["append"] = MEMORY_REMINDER
        return [Finding(self.name, change, summary, evidence)]


class ToolFailureRule:
    name = "ToolFailureRule"

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        findings = []
        for tool, stats in sorted(m.tools.items()):
            if tool in agent.disabled_tools or stats.calls < TOOL_FAILURE_MIN_CALLS:
                continue
            if stats.error_rate < TOOL_FAILURE_RATE:
                continue
            evidence = {
                "tool": tool,
                "calls": stats.calls,
                "errors": stats.errors,
                "error_rate": round(stats.error_rate, 4),
                "threshold_rate": TOOL_FAILURE_RATE,
                "min_calls": TOOL_FAILURE_MIN_CALLS,
            }
            summary = (
                f"{tool} failed in {stats.errors} of {stats.calls} calls "
                f"({stats.error_rate:.0%}) for {agent.agent_id}: stop offering it."
            )
            change = {"kind": str(ChangeKind.TOOL_POLICY), "disable": [tool]}
            findings.append(Finding(self.name, change, summary, evidence))
        return findings


class RepeatedToolRule:
    name = "RepeatedToolRule"

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        if not m.runs or m.repeated_tool_calls < REPEATED_MIN_CALLS:
            return []
        share = m.runs_with_repeats / m.runs
        if share < REPEATED_RUN_SHARE or REPEAT_ADVICE in agent.system_prompt:
            return []
        top = sorted(m.repeated_by_tool.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        evidence = {
            "repeated_tool_calls": m.repeated_tool_calls,
            "runs_with_repeats": m.runs_with_repeats,
            "run_share": round(share, 4),
            "threshold_share": REPEATED_RUN_SHARE,
            "by_tool": dict(top),
        }
        names = ", ".join(name for name, _ in top)
        summary = (
            f"{agent.agent_id} repeated identical tool calls in {m.runs_with_repeats} of "
            f"{m.runs} runs (mostly {names}): tell it to reuse results instead."
        )
        change = {"kind": str(ChangeKind.PROMPT), "target": PROMPT_TARGET}
        change["append"] = REPEAT_ADVICE
        return [Finding(self.name, change, summary, evidence)]


class IterationLimitRule:
    name = "IterationLimitRule"

    def evaluate(self, m: AgentMetrics, agent: AgentView, memory_files: int) -> list[Finding]:
        if not m.runs or m.capped / m.runs < ITERATION_CAPPED_SHARE:
            return []
        if m.runs_with_repeats / m.runs >= REPEATED_RUN_SHARE:
            return []  # a loop, not a tight limit: RepeatedToolRule speaks for it
        current = agent.params["max_iterations"]
        desired = round(current * ITERATION_WANTED_GROWTH)
        target = capped_target(current, desired, agent.guardrails)
        evidence = {
            "capped_runs": m.capped,
            "capped_share": round(m.capped / m.runs, 4),
            "threshold_share": ITERATION_CAPPED_SHARE,
            "wanted": desired,
            "max_delta_per_cycle": agent.guardrails.max_delta_per_cycle,
        }
        summary = (
            f"{m.capped} of {m.runs} runs of {agent.agent_id} stopped at max_iterations "
            f"{current}: raise it to {target}."
        )
        change = {"kind": str(ChangeKind.PARAM), "param": "max_iterations", "from": current}
        change["to"] = target
        return [Finding(self.name, change, summary, evidence)]


RULES: Sequence[Rule] = (
    LowRetrievalUsageRule(),
    ToolFailureRule(),
    RepeatedToolRule(),
    IterationLimitRule(),
)
