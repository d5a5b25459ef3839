"""The guardrail checks on a suggested change: which names it touches, which lock stops it,
and how far one cycle may move a numeric parameter (``max_delta_per_cycle``)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config.evolution import EvolutionGuardrails
from bot.evolution.guardrails import (
    capped_target,
    locked_by,
    max_step,
    touched,
    within_cap,
)

TENTH = EvolutionGuardrails(max_delta_per_cycle=0.1)


def param(frm: int, to: int, name: str = "max_iterations") -> dict[str, Any]:
    return {"kind": "param", "param": name, "from": frm, "to": to}


class TestTouched:
    def test_param_touches_its_name_only(self) -> None:
        assert touched(param(20, 22, "history_limit")) == {"history_limit"}

    def test_prompt_touches_its_target_and_prompt(self) -> None:
        assert touched({"kind": "prompt", "append": "x"}) == {"system_prompt", "prompt"}
        change = {"kind": "prompt", "target": "extra_context", "append": "x"}
        assert touched(change) == {"extra_context", "prompt"}

    def test_tool_policy_touches_each_tool(self) -> None:
        change = {"kind": "tool_policy", "disable": ["web_fetch", "exec"]}
        assert touched(change) == {"disabled_tools", "tools", "tool:web_fetch", "tool:exec"}

    def test_unknown_kind_touches_nothing(self) -> None:
        assert touched({"kind": "rename"}) == set()
        assert touched({}) == set()


class TestLockedBy:
    @pytest.mark.parametrize(
        ("change", "locked", "hit"),
        [
            (param(20, 22), ["max_iterations"], "max_iterations"),
            (param(20, 22), ["history_limit", "system_prompt"], None),
            ({"kind": "prompt", "append": "x"}, ["prompt"], "prompt"),
            ({"kind": "prompt", "append": "x"}, ["system_prompt"], "system_prompt"),
            ({"kind": "tool_policy", "disable": ["a"]}, ["tool:a"], "tool:a"),
            ({"kind": "tool_policy", "disable": ["a"]}, ["tool:b"], None),
            ({"kind": "tool_policy", "disable": ["a"]}, ["tools"], "tools"),
        ],
    )
    def test_lock_names(self, change: dict[str, Any], locked: list[str], hit: str | None) -> None:
        assert locked_by(change, EvolutionGuardrails(locked_params=locked)) == hit

    def test_several_hits_name_the_first_in_sorted_order(self) -> None:
        change = {"kind": "tool_policy", "disable": ["web_fetch"]}
        guardrails = EvolutionGuardrails(
            locked_params=["tools", "disabled_tools", "tool:web_fetch"]
        )
        assert locked_by(change, guardrails) == "disabled_tools"

    def test_nothing_locked(self) -> None:
        assert locked_by(param(20, 40), EvolutionGuardrails()) is None


class TestSteps:
    @pytest.mark.parametrize(
        ("current", "delta", "step"),
        [(20, 0.1, 2), (25, 0.1, 2), (5, 0.1, 0), (30, 0.1, 3), (100, 0.29, 29), (-40, 0.25, 10)],
    )
    def test_max_step_is_floor_of_the_relative_delta(
        self, current: int, delta: float, step: int
    ) -> None:
        # 100 * 0.29 is 28.999999999999996 in floats: still 29 steps.
        assert max_step(current, EvolutionGuardrails(max_delta_per_cycle=delta)) == step

    @pytest.mark.parametrize(
        ("current", "desired", "target"),
        [(20, 30, 22), (20, 21, 21), (20, 10, 18), (20, 19, 19), (20, 20, 20), (5, 50, 5)],
    )
    def test_capped_target(self, current: int, desired: int, target: int) -> None:
        assert capped_target(current, desired, TENTH) == target

    def test_within_cap_on_both_sides_of_the_limit(self) -> None:
        assert within_cap(param(20, 22), TENTH)
        assert within_cap(param(20, 18), TENTH)
        assert not within_cap(param(20, 23), TENTH)
        assert not within_cap(param(20, 17), TENTH)
        assert not within_cap(param(5, 6), TENTH)  # not even one step of 5

    def test_a_capped_target_is_always_within_the_cap(self) -> None:
        for current in (1, 7, 20, 99, 250):
            for desired in (0, current // 2, current * 3):
                target = capped_target(current, desired, TENTH)
                assert within_cap(param(current, target), TENTH)

    def test_non_param_changes_are_never_capped(self) -> None:
        assert within_cap({"kind": "prompt", "append": "x" * 10_000}, TENTH)
        assert within_cap({"kind": "tool_policy", "disable": ["a", "b", "c"]}, TENTH)
