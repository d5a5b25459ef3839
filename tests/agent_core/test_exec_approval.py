"""The exec approval hooks on their own: the deny list, the ask hook's verdicts, and that
other tools and the off mode pass untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core import Approval, ExecProfile, RunRequest, Verdict, exec_hooks
from agent_core.hooks import Block, check_pre_tool_use
from agent_core.messages import ToolCall
from agent_core.tools import ToolContext

DENY = [r"\brm\s+-rf\s+/(\s|$)"]


class Approver:
    def __init__(self, verdict: Verdict | None) -> None:
        self.verdict = verdict
        self.asked: list[str] = []

    async def ask(self, ctx: ToolContext, command: str, profile: ExecProfile) -> Verdict | None:
        self.asked.append(command)
        return self.verdict


def profile(approval: Approval | None) -> ExecProfile:
    return ExecProfile("bwrap", "/workspace", False, 30, 1 << 29, 64, 1 << 14, approval, 5.0)


def exec_call(command: str, name: str = "exec") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=json.dumps({"command": command}))


def ctx(chat_type: str = "group") -> ToolContext:
    request = RunRequest("s", "hi", "web:alice", chat_type=chat_type)
    return ToolContext(Path("."), "s", "web:alice", "main", "r", request=request)


async def verdict(mode: Approval | None, approver: Approver | None, call: ToolCall) -> Block | None:
    return await check_pre_tool_use(exec_hooks(profile(mode), DENY, approver), call, ctx())


async def test_approved_runs_denied_and_silent_do_not() -> None:
    ok = Approver(Verdict.APPROVED)
    assert await verdict(Approval.ASK, ok, exec_call("ls")) is None
    assert ok.asked == ["ls"]
    denied = await verdict(Approval.ASK, Approver(Verdict.DENIED), exec_call("ls"))
    assert denied is not None and "/deny" in denied.reason
    late = await verdict(Approval.ASK, Approver(Verdict.TIMED_OUT), exec_call("ls"))
    assert late is not None and "within 5 s" in late.reason
    alone = await verdict(Approval.ASK, Approver(Verdict.NO_ONE), exec_call("ls"))
    assert alone is not None and "none of them is in this chat" in alone.reason
    nowhere = await verdict(Approval.ASK, Approver(None), exec_call("ls"))
    assert nowhere is not None and "no chat" in nowhere.reason
    nobody = await verdict(Approval.ASK, None, exec_call("ls"))
    assert nobody is not None and "no one can be asked" in nobody.reason


@pytest.mark.parametrize("mode", [Approval.ASK, Approval.DENY_PATTERNS])
async def test_the_deny_list_refuses_before_anyone_is_asked(mode: Approval) -> None:
    approver = Approver(Verdict.APPROVED)
    block = await verdict(mode, approver, exec_call("rm -rf / "))
    assert block is not None and "deny list" in block.reason
    assert approver.asked == []


async def test_deny_patterns_mode_asks_nobody() -> None:
    approver = Approver(Verdict.DENIED)
    assert await verdict(Approval.DENY_PATTERNS, approver, exec_call("ls")) is None
    assert approver.asked == []


async def test_off_and_other_tools_pass() -> None:
    approver = Approver(Verdict.DENIED)
    assert await verdict(Approval.OFF, approver, exec_call("rm -rf /")) is None
    assert await verdict(Approval.ASK, approver, exec_call("rm -rf /", name="read_file")) is None
    assert approver.asked == []
