"""End to end through the local channel: channel → gateway → loop → real HTTP LLM → channel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core import RunStatus
from bot.app import Loopgate
from bot.storage import SqlSessionStore
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, call, delay, error, text, tool_calls


class TestReply:
    async def test_reply_is_delivered_and_stored(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(text("Hello ", "Alice!"))
        result = await dm.ask("hi")
        assert result is not None and result.status is RunStatus.COMPLETED
        assert dm.texts() == ["Hello Alice!"]
        kinds = dm.kinds()
        assert kinds[0] == "reaction" and kinds[1] == "typing"
        assert kinds[-1] == "reaction_removed"  # status reaction cleaned up
        # Typing stops before the answer: nothing typing-related after the message.
        assert "typing" not in kinds[kinds.index("message") :]
        sent = llm.chat_requests[0].json
        assert sent["model"] == "fake-model" and sent["stream"] is True
        assert sent["messages"][-1] == {"role": "user", "content": "hi"}
        history = await SqlSessionStore(app.db).load_history("agent:main:web:direct:dm-alice")
        assert [(m.role, m.content) for m in history.messages] == [
            ("user", "hi"),
            ("assistant", "Hello Alice!"),
        ]

    async def test_long_reply_is_split_within_the_limit(self, dm: ChatDriver, llm: FakeLLM) -> None:
        paragraphs = [f"Paragraph {i}: " + "word " * 400 for i in range(12)]
        llm.script(text("\n\n".join(paragraphs)))
        await dm.ask("write a lot")
        chunks = dm.texts()
        assert len(chunks) > 1
        assert all(len(c) <= dm.channel.capabilities.max_chars for c in chunks)
        assert chunks[0].startswith("Paragraph 0:")
        assert "".join("".join(chunks).split()) == "".join("".join(paragraphs).split())

    async def test_duplicate_message_is_processed_once(self, dm: ChatDriver, llm: FakeLLM) -> None:
        first = await dm.send("hi", message_id="m-1")
        second = await dm.send("hi", message_id="m-1")
        assert first is not None and second is None
        await asyncio.wait_for(first, 10)
        assert len(llm.chat_requests) == 1 and len(dm.texts()) == 1


class TestTools:
    async def test_tool_call_round_trip(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        llm.script(
            tool_calls(call("write_file", {"path": "todo.md", "content": "- milk"})),
            text("Saved your list."),
        )
        result = await dm.ask("remember: milk")
        assert result is not None and result.status is RunStatus.COMPLETED
        assert dm.texts() == ["Saved your list."]
        files = list((tmp_path / "workspaces").rglob("todo.md"))
        assert len(files) == 1 and files[0].read_text() == "- milk"
        second = llm.chat_requests[1].json["messages"]
        assert second[-2]["tool_calls"][0]["function"]["name"] == "write_file"
        assert second[-1]["role"] == "tool" and "wrote 6 characters" in second[-1]["content"]

    async def test_workspace_escape_is_refused(
        self, dm: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        (tmp_path / "secret.txt").write_text("hunter2")
        llm.script(
            tool_calls(call("read_file", {"path": "../../secret.txt"})),
            text("I can't read that."),
        )
        await dm.ask("read ../../secret.txt")
        tool_result = llm.chat_requests[1].json["messages"][-1]
        assert tool_result["role"] == "tool"
        assert tool_result["content"].startswith("Error: access denied")
        assert "hunter2" not in tool_result["content"]
        assert dm.texts() == ["I can't read that."]


class TestSilenceAndErrors:
    async def test_no_reply_sends_nothing_and_cleans_up(self, dm: ChatDriver, llm: FakeLLM) -> None:
        llm.script(text("NO_REPLY"))
        result = await dm.ask("ok thanks")
        assert result is not None and result.silent
        assert dm.texts() == []
        assert dm.kinds()[-1] == "reaction_removed"

    async def test_provider_error_gives_a_friendly_message(
        self, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(error(400, "model_not_found: gpt-9 does not exist"))
        result = await dm.ask("hi")
        assert result is not None and result.status is RunStatus.FAILED
        assert dm.texts() == ["Sorry, something went wrong while answering. Please try again."]

    async def test_silent_errors_send_nothing(self, tmp_path: Path, llm: FakeLLM) -> None:
        config = make_config(tmp_path, llm, bot={"silent_errors": True})
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-bob", ChatType.DIRECT))
            llm.script(error(400, "bad request"))
            result = await dm.ask("hi")
            assert result is not None and result.status is RunStatus.FAILED
            assert dm.texts() == []

    async def test_transient_error_is_retried(self, dm: ChatDriver, llm: FakeLLM) -> None:
        llm.script(error(503), text("second try"))
        await dm.ask("hi")
        assert dm.texts() == ["second try"]
        assert len(llm.chat_requests) == 2


class TestStop:
    async def test_stop_cancels_the_run_and_sends_no_answer(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("too late")))
        done = await dm.send("long task")
        assert done is not None
        await dm.wait_for(lambda: len(llm.chat_requests) == 1 and app.registry.active_runs == 1)
        await dm.send("/stop")
        result = await asyncio.wait_for(done, 5)
        assert result is not None and result.status is RunStatus.CANCELLED
        assert dm.texts() == ["Stopped."]
        assert app.registry.active_runs == 0
        typing_after = dm.kinds()[dm.kinds().index("message") :]
        assert "typing" not in typing_after
        assert dm.kinds()[-1] == "reaction_removed"

    async def test_stop_with_nothing_running(self, dm: ChatDriver) -> None:
        await dm.send("/stop")
        assert dm.texts() == ["Nothing to stop."]

    async def test_stopall_cancels_and_empties_the_queue(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("a")), text("b"), text("c"))
        jobs = [await dm.send(t) for t in ("one", "two", "three")]
        await dm.wait_for(lambda: len(llm.chat_requests) == 1)
        await dm.send("/stopall")
        results = await asyncio.gather(*(asyncio.wait_for(j, 5) for j in jobs if j))
        assert results[0] is not None and results[0].status is RunStatus.CANCELLED
        assert results[1:] == [None, None]  # dropped from the queue, never run
        await asyncio.sleep(0.05)  # kept (negative check)
        assert len(llm.chat_requests) == 1
        assert dm.texts() == ["Stopped."]

    async def test_group_member_cannot_stop_another_users_run(
        self, app: Loopgate, group: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("x")))
        done = await group.send("long task", sender="alice")
        await group.wait_for(lambda: app.registry.active_runs == 1)
        await group.send("/stop", sender="mallory")
        assert group.texts() == ["Only the person who asked or an admin can stop this."]
        assert app.registry.active_runs == 1
        await group.send("/stop", sender="root", admin=True)
        assert done is not None
        result = await asyncio.wait_for(done, 5)
        assert result is not None and result.status is RunStatus.CANCELLED
        assert group.texts()[-1] == "Stopped."

    async def test_requester_can_stop_own_run_in_group(
        self, app: Loopgate, group: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(delay(30, text("x")))
        done = await group.send("long task", sender="alice")
        await group.wait_for(lambda: app.registry.active_runs == 1)
        await group.send("/stop", sender="alice")
        assert done is not None
        result = await asyncio.wait_for(done, 5)
        assert result is not None and result.status is RunStatus.CANCELLED
