"""What the ``/approve`` and ``/deny`` tests share (``tests/bot/pipeline/test_approvals.py``,
``tests/bot/cluster/test_approvals.py``): the command the fake model runs, what the model got
back, and the tool context of a command Alice's run asks about in a group."""

from __future__ import annotations

from pathlib import Path

from agent_core import RunRequest
from agent_core.tools import ToolContext
from channels import ChatRef, InboundMessage, Sender
from tests.fakes.llm_server import FakeLLM

COMMAND = "echo ran > proof.txt; echo finished"


def tool_result(llm: FakeLLM) -> str:
    messages = llm.chat_requests[-1].messages
    return next(m["content"] for m in messages if m.get("role") == "tool")


def alice_asks(chat: ChatRef) -> ToolContext:
    """The context of an ``exec`` call in the run Alice's "hi" in ``chat`` started."""
    origin = InboundMessage(chat, "m1", Sender("alice", "Alice"), "hi")
    request = RunRequest("s", "hi", "web:alice", chat_type="group", origin=origin)
    return ToolContext(Path("."), "s", "web:alice", "main", "r", request=request)
