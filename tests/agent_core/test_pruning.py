"""Context pruning: soft trim at 0.3, hard clear at 0.5, the protected zone, mode off."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from agent_core.history import is_valid_sequence
from agent_core.messages import Message, ToolCall
from agent_core.pruning import (
    CLEARED,
    SOFT_TRIM_JOINER,
    could_prune,
    prunable_indices,
    prune_context,
)
from agent_core.settings import PruningSettings
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from tests.agent_core.test_loop import make_loop, request


def chars(messages: Sequence[Message]) -> int:
    """1 token per character keeps the ratios obvious."""
    return sum(len(m.content) for m in messages)


def session(*tool_sizes: int, tail_assistants: int = 3) -> list[Message]:
    out = [Message.system("S"), Message.user("first")]
    for i, size in enumerate(tool_sizes):
        c = ToolCall(f"c{i}", "read_file", "{}")
        out += [Message.assistant("", (c,)), Message.tool(c, "r" * size)]
    for i in range(tail_assistants):
        out += [Message.user(f"q{i}"), Message.assistant(f"a{i}")]
    return out


class TestProtectedZone:
    def test_last_assistants_first_user_and_system_are_never_prunable(self) -> None:
        messages = session(10, 10, 10, tail_assistants=0)
        # assistants at 2, 4, 6; keep last 3 -> cutoff at 2: nothing prunable
        assert prunable_indices(messages, 3) == []
        assert prunable_indices(messages, 1) == [3, 5]
        assert prunable_indices(messages, 0) == [3, 5, 7]


class TestCouldPrune:
    """``could_prune`` lets the context budget skip pruning's thresholds (and the tokenizer):
    it must never say no where the passes would change something."""

    def test_no_means_the_passes_change_nothing_at_any_ratio(self) -> None:
        rng = random.Random(7)
        settings_cases = [
            PruningSettings(),
            PruningSettings(soft_trim_max_chars=40, soft_trim_keep_chars=10),
            PruningSettings(min_prunable_tool_chars=0),
            PruningSettings(soft_trim_max_chars=10_000, min_prunable_tool_chars=30),
            PruningSettings(keep_last_assistants=0),
        ]
        said = {True: 0, False: 0}
        for _ in range(400):
            settings = rng.choice(settings_cases)
            sizes = [rng.choice((0, 5, 30, 41, 100, 6_001)) for _ in range(rng.randint(0, 4))]
            messages = session(*sizes, tail_assistants=rng.randint(0, 4))
            if rng.random() < 0.2 and sizes:
                messages[3] = Message.tool(messages[2].tool_calls[0], CLEARED)
            verdict = could_prune(messages, settings)
            said[verdict] += 1
            # a count far over both thresholds: the passes do all they can
            result = prune_context(messages, budget=1, count=lambda m: 10**9, settings=settings)
            if not verdict:
                assert result.messages == messages and not result.changed, (sizes, settings)
        assert said[True] and said[False]  # both answers were exercised

    def test_a_long_result_in_the_protected_zone_is_not_prunable(self) -> None:
        settings = PruningSettings()  # the last 3 assistants, the tool call's among them
        assert not could_prune(session(60_000, tail_assistants=2), settings)
        assert could_prune(session(60_000, tail_assistants=3), settings)
        assert not could_prune(session(60_000, tail_assistants=3), PruningSettings(mode="off"))


class TestPasses:
    def test_below_soft_ratio_nothing_changes(self) -> None:
        messages = session(7_000)
        result = prune_context(messages, budget=100_000, count=chars, settings=PruningSettings())
        assert not result.changed and result.messages == messages

    def test_soft_trim_keeps_first_and_last_3000(self) -> None:
        messages = session(7_000, 5_000)
        content = "A" * 3_000 + "M" * 1_000 + "Z" * 3_000
        messages[3] = Message.tool(ToolCall("c0", "read_file", "{}"), content)
        budget = 30_000  # ratio ~0.4: soft only
        result = prune_context(messages, budget=budget, count=chars, settings=PruningSettings())
        assert result.soft_trimmed == 1 and result.hard_cleared == 0
        assert result.messages[3].content == "A" * 3_000 + SOFT_TRIM_JOINER + "Z" * 3_000
        assert result.messages[5].content == "r" * 5_000  # under 6,000: untouched

    def test_hard_clear_oldest_first_and_stops_under_threshold(self) -> None:
        messages = session(60_000, 60_000, 60_000)
        # after soft trim each is ~6,000 chars: 18k + small; budget makes that >= 0.5
        result = prune_context(messages, budget=20_000, count=chars, settings=PruningSettings())
        cleared = [i for i, m in enumerate(result.messages) if m.content == CLEARED]
        assert cleared == [3, 5]  # the third clear was not needed
        assert result.ratio_after < 0.5
        assert is_valid_sequence(result.messages[1:])

    def test_results_under_min_prunable_chars_are_not_cleared(self) -> None:
        messages = session(40_000, 40_000, 40_000)
        result = prune_context(messages, budget=10_000, count=chars, settings=PruningSettings())
        assert result.hard_cleared == 0 and result.soft_trimmed == 3

    def test_protected_results_are_kept_even_over_budget(self) -> None:
        messages = session(100_000, tail_assistants=0)  # its assistant is among the last 3
        result = prune_context(messages, budget=1_000, count=chars, settings=PruningSettings())
        assert result.messages[3].content == "r" * 100_000

    def test_mode_off_does_nothing(self) -> None:
        messages = session(100_000, 100_000)
        off = PruningSettings(mode="off")
        result = prune_context(messages, budget=1_000, count=chars, settings=off)
        assert not result.changed and result.ratio_before == 0.0

    def test_thresholds_are_configurable(self) -> None:
        messages = session(7_000)
        lenient = PruningSettings(soft_trim_ratio=0.9, hard_clear_ratio=0.95)
        assert not prune_context(messages, budget=10_000, count=chars, settings=lenient).changed


class TestInTheLoop:
    async def test_long_tool_results_are_trimmed_before_the_next_call(self, tmp_path: Path) -> None:
        (tmp_path / "ws").mkdir()
        provider = ScriptedProvider(
            *[tool_calls(call("read_file", {"path": "big.txt"})) for _ in range(4)],
            reply("done"),
        )
        loop, _, _ = make_loop(tmp_path, provider, context_window=60_000)
        user_dir = loop.workspaces.user_dir("u1")
        user_dir.mkdir(parents=True)
        (user_dir / "big.txt").write_text("x " * 20_000)  # 40,000 chars, ~20k tokens
        await loop.run(request("read it four times"))
        last = provider.requests[-1].messages
        tools = [m for m in last if m.role == "tool"]
        assert len(tools) == 4
        # the oldest result (outside the last 3 assistants) was trimmed; recent ones were not
        assert SOFT_TRIM_JOINER in tools[0].content and len(tools[0].content) < 7_000
        assert len(tools[-1].content) == 40_000
