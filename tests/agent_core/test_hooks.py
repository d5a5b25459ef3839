"""agent_core/hooks.py: PreToolUse hooks run in order, the first block wins, a broken hook
blocks (fail closed). How tool_exec applies a block is tested in test_tool_exec.py."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from agent_core.hooks import Block, PreToolUseHook, blocked_message, check_pre_tool_use
from agent_core.messages import ToolCall
from agent_core.tools.base import ToolContext

CALL = ToolCall("c1", "write_file", '{"path": "a.txt"}')


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path, "s", "u", "main", "r1")


def recording(seen: list[str], name: str, verdict: Block | None = None) -> PreToolUseHook:
    async def hook(call: ToolCall, context: ToolContext) -> Block | None:
        seen.append(name)
        return verdict

    return hook


async def test_no_hooks_allow_the_call(tmp_path: Path) -> None:
    assert await check_pre_tool_use([], CALL, ctx(tmp_path)) is None


async def test_every_hook_runs_in_order_when_all_allow(tmp_path: Path) -> None:
    seen: list[str] = []
    hooks = [recording(seen, "first"), recording(seen, "second"), recording(seen, "third")]
    assert await check_pre_tool_use(hooks, CALL, ctx(tmp_path)) is None
    assert seen == ["first", "second", "third"]


async def test_the_first_block_wins_and_later_hooks_do_not_run(tmp_path: Path) -> None:
    seen: list[str] = []
    hooks = [
        recording(seen, "allow"),
        recording(seen, "block", Block("read-only mode")),
        recording(seen, "other", Block("never asked")),
    ]
    with capture_logs() as logs:
        verdict = await check_pre_tool_use(hooks, CALL, ctx(tmp_path))
    assert verdict == Block("read-only mode")
    assert seen == ["allow", "block"]
    assert [(e["event"], e["tool"], e["reason"]) for e in logs] == [
        ("hook.blocked", "write_file", "read-only mode")
    ]


async def test_a_hook_that_raises_blocks_the_call_and_names_the_error(tmp_path: Path) -> None:
    seen: list[str] = []

    async def broken(call: ToolCall, context: ToolContext) -> Block | None:
        raise KeyError("policy table")

    with capture_logs() as logs:
        verdict = await check_pre_tool_use([broken, recording(seen, "after")], CALL, ctx(tmp_path))
    assert verdict is not None
    assert verdict.reason == "a pre-tool-use check failed (KeyError)"
    assert seen == []  # fail closed: nothing after the broken hook decides otherwise
    assert [(e["event"], e["hook"]) for e in logs] == [("hook.failed", "broken")]


async def test_hooks_see_the_call_and_its_context(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str]] = []

    async def inspect(call: ToolCall, context: ToolContext) -> Block | None:
        seen.append((call.name, call.parsed_arguments()["path"], context.run_id))
        return None

    await check_pre_tool_use([inspect], CALL, ctx(tmp_path))
    assert seen == [("write_file", "a.txt", "r1")]


def test_blocked_message_names_the_tool_and_the_reason() -> None:
    assert blocked_message(CALL, Block("no writes today")) == (
        "Error: the call to write_file was blocked and not executed: no writes today"
    )
