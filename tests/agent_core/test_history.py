"""History pipeline: limitHistoryTurns then sanitizeHistory; the provider never gets a broken
tool_use/tool_result sequence, whatever is stored."""

from __future__ import annotations

import random
from pathlib import Path

from agent_core.history import (
    MISSING_TOOL_RESULT,
    is_valid_sequence,
    limit_history_turns,
    prepare_history,
    sanitize_history,
)
from agent_core.messages import Message, ToolCall
from agent_core.testing import ScriptedProvider, reply
from tests.agent_core.test_loop import make_loop, request


def tc(i: str) -> ToolCall:
    return ToolCall(id=i, name="read_file", arguments="{}")


def roles(messages: list[Message]) -> list[str]:
    return [m.role if m.role != "tool" else f"tool:{m.tool_call_id}" for m in messages]


class TestLimitHistoryTurns:
    def test_keeps_last_n_user_turns_with_their_messages(self) -> None:
        a = tc("a")
        history = [
            Message.user("1"),
            Message.assistant("r1"),
            Message.user("2"),
            Message.assistant("", (a,)),
            Message.tool(a, "x"),
            Message.assistant("r2"),
            Message.user("3"),
            Message.assistant("r3"),
        ]
        kept = limit_history_turns(history, 2)
        assert [m.content for m in kept] == ["2", "", "x", "r2", "3", "r3"]

    def test_fewer_turns_than_limit_keeps_all_and_zero_means_unlimited(self) -> None:
        history = [Message.user("1"), Message.assistant("r")]
        assert limit_history_turns(history, 5) == history
        assert limit_history_turns(history, 0) == history


class TestSanitizeHistory:
    def test_leading_orphan_tool_results_are_dropped(self) -> None:
        out = sanitize_history([Message.tool(tc("z"), "orphan"), Message.user("hi")])
        assert roles(out) == ["user"]

    def test_mismatched_and_duplicate_results_are_dropped(self) -> None:
        a = tc("a")
        out = sanitize_history(
            [
                Message.user("q"),
                Message.assistant("", (a,)),
                Message.tool(tc("other"), "wrong id"),
                Message.tool(a, "right"),
                Message.tool(a, "duplicate"),
            ]
        )
        assert roles(out) == ["user", "assistant", "tool:a"]
        assert out[-1].content == "right"

    def test_missing_results_are_synthesized_in_call_order(self) -> None:
        a, b = tc("a"), tc("b")
        out = sanitize_history(
            [
                Message.user("q"),
                Message.assistant("", (a, b)),
                Message.tool(b, "B"),
                Message.user("n"),
            ]
        )
        assert roles(out) == ["user", "assistant", "tool:a", "tool:b", "user"]
        assert out[2].content == MISSING_TOOL_RESULT and out[3].content == "B"

    def test_tool_result_after_a_user_message_is_an_orphan(self) -> None:
        a = tc("a")
        out = sanitize_history(
            [Message.assistant("", (a,)), Message.user("interrupt"), Message.tool(a, "late")]
        )
        assert roles(out) == ["assistant", "tool:a", "user"]
        assert is_valid_sequence(out)

    def test_random_corruption_always_yields_a_valid_sequence(self) -> None:
        rng = random.Random(5)
        for _ in range(500):
            messages: list[Message] = []
            ids = [f"c{i}" for i in range(6)]
            for _ in range(rng.randint(0, 25)):
                kind = rng.choice(["user", "assistant", "calls", "tool", "tool"])
                if kind == "user":
                    messages.append(Message.user("u"))
                elif kind == "assistant":
                    messages.append(Message.assistant("a"))
                elif kind == "calls":
                    calls = tuple(tc(i) for i in rng.sample(ids, rng.randint(1, 3)))
                    messages.append(Message.assistant("", calls))
                else:
                    messages.append(Message.tool(tc(rng.choice(ids)), "r"))
            for limit in (0, 1, 3):
                assert is_valid_sequence(prepare_history(messages, limit)), messages


class TestInTheLoop:
    async def test_broken_stored_history_is_repaired_before_the_provider(
        self, tmp_path: Path
    ) -> None:
        provider = ScriptedProvider(reply("ok"))
        loop, store, _ = make_loop(tmp_path, provider, history_limit=2)
        a = tc("a")
        store.sessions["s1"] = [
            Message.user("old 1"),
            Message.assistant("old answer"),
            Message.user("old 2"),
            Message.assistant("", (a, tc("b"))),  # crashed mid-run: b never answered
            Message.tool(a, "A"),
            Message.tool(tc("zzz"), "stray"),
            Message.user("old 3"),
            Message.assistant("r3"),
        ]
        await loop.run(request("new"))
        sent = provider.requests[0].messages
        assert sent[0].role == "system"
        assert is_valid_sequence(sent[1:])
        assert [m.content for m in sent[1:]] == [
            "old 2",
            "",
            "A",
            MISSING_TOOL_RESULT,
            "old 3",
            "r3",
            "new",
        ]
