"""``tools.exec.approval``: the command is posted to the chat and runs only once an owner or
admin answers ``/approve``; ``/deny``, silence and the deny list keep it from running. A whole
Loopgate, the fake model calling ``exec`` in the bwrap sandbox."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core import ExecProfile, RunResult, Verdict
from bot.app import Loopgate
from bot.http.server import create_app
from bot.pipeline.approvals import ExecApprovals
from channels import Capabilities, ChatRef, ChatType, Formatting
from tests.approval_support import COMMAND, alice_asks, tool_result
from tests.conftest import ChatDriver, make_config
from tests.exec_support import needs_bwrap
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.fakes.slack_events import EventSender, block_actions, message_event
from tests.fakes.slack_server import FakeSlack
from tests.pipeline_support import RecordingChannel
from tests.slack_support import Bot, slack_section

pytestmark = needs_bwrap


def exec_config(tmp_path: Path, llm: FakeLLM, **exec_keys: Any) -> Any:
    return make_config(
        tmp_path,
        llm,
        agents={
            "defaults": {"workspace": str(tmp_path / "workspaces"), "owner_ids": ["web:owner"]}
        },
        tools={"exec": {"enabled": True, "timeout": 5, **exec_keys}},
    )


@pytest.fixture
async def gate(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(exec_config(tmp_path, llm, approval_timeout=2)) as started:
        yield started


@pytest.fixture
def group(gate: Loopgate) -> ChatDriver:
    """A group chat of ``gate``, where Alice is no owner."""
    return ChatDriver(gate, ChatRef("web", "room-1", ChatType.GROUP))


async def asked(chat: ChatDriver, command: str = "") -> asyncio.Future[RunResult | None]:
    """Alice asks; returns the run once the bot has posted its request for approval."""
    done = await chat.send("please run it", sender="alice")
    assert done is not None
    await chat.wait_for(lambda: any("/approve" in t for t in chat.texts()))
    return done


class TestAsk:
    async def test_an_owner_s_approve_runs_it(
        self, group: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("done"))
        done = await asked(group)
        request = group.texts()[-1]
        assert COMMAND in request and "/deny" in request
        assert await group.send("/approve", sender="mallory") is None  # not an owner
        assert group.texts()[-1] == "Only an owner or admin of this agent may answer."
        assert await group.send("/approve", sender="owner") is None
        await asyncio.wait_for(done, 10)
        assert group.texts()[-2] == "Approved: the command runs now."
        assert "exit code: 0" in tool_result(llm) and "finished" in tool_result(llm)
        assert list((tmp_path / "workspaces").rglob("proof.txt"))

    async def test_deny_keeps_it_from_running(
        self, group: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("ok, not run"))
        done = await asked(group)
        await group.send("/deny", sender="owner")
        await asyncio.wait_for(done, 10)
        assert "Denied: the command will not run." in group.texts()
        assert "refused to run it (/deny)" in tool_result(llm)
        assert not list((tmp_path / "workspaces").rglob("proof.txt"))
        assert await group.send("/approve", sender="owner") is None
        assert group.texts()[-1] == "No command is waiting for approval here."

    async def test_no_answer_in_time_is_a_refusal(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("nobody answered"))
        async with Loopgate(exec_config(tmp_path, llm, approval_timeout=0.3)) as app:
            group = ChatDriver(app, ChatRef("web", "room-3", ChatType.GROUP))
            done = await group.send("please run it", sender="alice")
            assert done is not None
            await asyncio.wait_for(done, 10)
        assert "no owner or admin answered within 0.3 s" in tool_result(llm)
        assert any(t.startswith("No answer within 0.3 s") for t in group.texts())
        assert not list((tmp_path / "workspaces").rglob("proof.txt"))


class TestDefaults:
    async def test_an_owner_s_direct_chat_needs_no_approval(
        self, gate: Loopgate, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": "echo direct"})), text("done"))
        dm = ChatDriver(gate, ChatRef("web", "dm-owner", ChatType.DIRECT))
        await dm.ask("run it", sender="owner")
        assert "direct" in tool_result(llm)
        assert not any("/approve" in t for t in dm.texts())

    async def test_another_user_s_direct_chat_has_no_one_to_ask(
        self, gate: Loopgate, llm: FakeLLM, tmp_path: Path
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("can't"))
        dm = ChatDriver(gate, ChatRef("web", "dm-alice", ChatType.DIRECT))
        await dm.ask("run it", sender="alice")
        assert "none of them is in this chat" in tool_result(llm)
        assert not any("/approve" in t for t in dm.texts())
        assert not list((tmp_path / "workspaces").rglob("proof.txt"))

    async def test_the_deny_list_refuses_before_asking(
        self, group: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": "rm -rf / --no-preserve-root"})), text("x"))
        await group.ask("wipe it", sender="alice")
        assert "matches the deny list" in tool_result(llm)
        assert not any("/approve" in t for t in group.texts())

    async def test_approval_off_runs_everything(self, tmp_path: Path, llm: FakeLLM) -> None:
        llm.script(tool_calls(call("exec", {"command": "echo unasked"})), text("done"))
        async with Loopgate(exec_config(tmp_path, llm, approval=False)) as app:  # YAML's off
            group = ChatDriver(app, ChatRef("web", "room-5", ChatType.GROUP))
            await group.ask("run it", sender="alice")
        assert "unasked" in tool_result(llm)


class TestSlackButtons:
    async def test_an_owner_clicks_approve(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        llm.script(tool_calls(call("exec", {"command": "echo clicked"})), text("done"))
        cfg = make_config(
            tmp_path,
            llm,
            channels={"slack": slack_section(slack, "http")},
            agents={
                "defaults": {
                    "workspace": str(tmp_path / "workspaces"),
                    "owner_ids": ["slack:UOWNER"],
                }
            },
            tools={"exec": {"enabled": True}},
        )
        async with Loopgate(cfg) as app:
            http = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(app, manage_lifespan=False)),
                base_url="http://loopgate",
            )
            bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
            try:
                event = message_event("<@UBOT> run it", channel="C1", user="UALICE")
                await bot.event(event)
                await slack.wait_for(lambda: bool(_with_buttons(slack)))
                (asking,) = _with_buttons(slack)
                assert asking.args["thread_ts"] == event["ts"]
                await bot.sender.send_interaction(
                    block_actions("/approve", user="UOWNER", thread_ts=event["ts"])
                )
                await bot.settle()
            finally:
                await bot.close()
        assert "clicked" in tool_result(llm)
        assert "Approved: the command runs now." in slack.thread_texts("C1", event["ts"])


def _with_buttons(slack: FakeSlack) -> list[Any]:
    return [c for c in slack.calls_of("chat.postMessage") if c.args.get("blocks")]


class TestRequestText:
    """The request shows the command exactly as it would run, whatever markup it holds."""

    async def ask(self, formatting: Formatting, command: str) -> str:
        channel = RecordingChannel(capabilities=Capabilities(formatting=formatting))
        approvals = ExecApprovals({"web": channel})
        ctx = alice_asks(ChatRef("web", "room", ChatType.GROUP))
        profile = ExecProfile("bwrap", "/workspace", False, 30, 1 << 29, 64, 1 << 14, None, 0.05)
        assert await approvals.ask(ctx, command, profile) is Verdict.TIMED_OUT
        return channel.texts()[0]

    async def test_html_markup_in_the_command_is_shown_not_rendered(self) -> None:
        text = await self.ask("html", 'echo "<b>hi</b>" > x && cat x')
        assert "&lt;b&gt;hi&lt;/b&gt;" in text and "<b>hi</b>" not in text
        assert "<pre>" in text or "<code>" in text

    async def test_backticks_in_the_command_do_not_close_its_block(self) -> None:
        command = "echo ```done``` `date`"
        text = await self.ask("markdown", command)
        assert command in text and "````\n" in text
