"""The bot's side of ``send_file``: the file goes to the chat of the run's origin, through
the channel's FileSending or, where a channel has none, as a note; each send is recorded under
the message it answers, so a replayed turn does not send it twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from agent_core import RunRequest
from agent_core.errors import ToolError
from agent_core.tools import OutgoingFile, ToolContext
from bot.app import Loopgate
from bot.pipeline.file_sender import ChatFileSender, size_text
from bot.pipeline.job import CRON_AT
from channels import (
    ChannelError,
    ChatRef,
    ChatType,
    FileRefused,
    InboundMessage,
    MessageRef,
    RetryAfter,
    Sender,
    SentFile,
)
from channels.local import LocalChannel
from tests.conftest import ChatDriver
from tests.fakes.llm_server import FakeLLM, text
from tests.inbound_support import MemorySeen
from tests.send_file_support import send_file, tool_results, workspace_file

CHAT = ChatRef("files", "c1", ChatType.GROUP)


@dataclass
class FileChannel(LocalChannel):
    """The local channel plus FileSending, scripted to fail before it sends."""

    name: str = "files"
    failures: list[ChannelError] = field(default_factory=list)
    files: list[tuple[ChatRef, bytes, str, str, str, str | None]] = field(default_factory=list)

    async def send_file(
        self,
        chat: ChatRef,
        path: Path,
        *,
        name: str,
        mime: str,
        caption: str = "",
        reply_to: str | None = None,
    ) -> SentFile:
        if self.failures:
            raise self.failures.pop(0)
        data = await asyncio.to_thread(path.read_bytes)
        self.files.append((chat, data, name, mime, caption, reply_to))
        return SentFile(MessageRef(chat, f"f{len(self.files)}"), "document")


def origin(message_id: str = "m1", **metadata: str) -> InboundMessage:
    return InboundMessage(CHAT, message_id, Sender("u1"), "hi", metadata=dict(metadata))


def context(tmp_path: Path, message: object = None, depth: int = 0) -> ToolContext:
    request = RunRequest("s", "hi", "u1", depth=depth, origin=message or origin())
    return ToolContext(tmp_path, "s", "u1", "main", "r1", request=request)


def outgoing(tmp_path: Path, data: bytes = b"report", caption: str = "") -> OutgoingFile:
    path = tmp_path / "report.pdf"
    if not path.exists():
        path.write_bytes(data)
    return OutgoingFile(path, "report.pdf", "report.pdf", "application/pdf", len(data), caption)


@pytest.fixture
def channel() -> FileChannel:
    return FileChannel()


class TestSending:
    async def test_the_file_goes_to_the_origin_chat_quoting_the_message_in_a_group(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        sender = ChatFileSender({"files": channel})
        result = await sender.send_file(context(tmp_path), outgoing(tmp_path, caption="Q3"))
        assert result == "Sent report.pdf (6 B) to the chat as a document."
        assert channel.files == [(CHAT, b"report", "report.pdf", "application/pdf", "Q3", "m1")]

    async def test_a_refused_file_is_a_tool_error_saying_nothing_was_sent(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        channel.failures.append(FileRefused("report.pdf is 60.0 MB, over the limit"))
        sender = ChatFileSender({"files": channel})
        with pytest.raises(ToolError, match="over the limit; nothing was sent"):
            await sender.send_file(context(tmp_path), outgoing(tmp_path))

    async def test_a_rate_limit_is_waited_out_then_the_file_sent_once(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        channel.failures.append(RetryAfter(0.01))
        sender = ChatFileSender({"files": channel})
        await sender.send_file(context(tmp_path), outgoing(tmp_path))
        assert len(channel.files) == 1

    async def test_a_platform_failure_is_a_tool_error(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        channel.failures.append(ChannelError("HTTP 502"))
        sender = ChatFileSender({"files": channel})
        with pytest.raises(ToolError, match=r"sending report\.pdf failed: HTTP 502"):
            await sender.send_file(context(tmp_path), outgoing(tmp_path))


class TestRefused:
    async def test_a_run_without_a_chat(self, tmp_path: Path, channel: FileChannel) -> None:
        ctx = ToolContext(tmp_path, "s", "u1", "main", "r1", request=RunRequest("s", "x", "u"))
        with pytest.raises(ToolError, match="no chat"):
            await ChatFileSender({"files": channel}).send_file(ctx, outgoing(tmp_path))

    async def test_a_child_run(self, tmp_path: Path, channel: FileChannel) -> None:
        with pytest.raises(ToolError, match="only the agent talking with the user"):
            await ChatFileSender({"files": channel}).send_file(
                context(tmp_path, depth=1), outgoing(tmp_path)
            )
        assert channel.files == []

    async def test_a_channel_that_is_not_running(self, tmp_path: Path) -> None:
        with pytest.raises(ToolError, match="'files' is not running"):
            await ChatFileSender({}).send_file(context(tmp_path), outgoing(tmp_path))


class TestRecorded:
    async def test_the_same_file_for_the_same_message_is_sent_once(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        sender = ChatFileSender({"files": channel}, sent=MemorySeen())
        await sender.send_file(context(tmp_path), outgoing(tmp_path))
        again = await sender.send_file(context(tmp_path), outgoing(tmp_path))
        assert again == "report.pdf was already sent to this chat for this message; not sent again."
        assert len(channel.files) == 1

    async def test_a_new_message_a_new_caption_or_a_new_occurrence_sends_again(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        sender = ChatFileSender({"files": channel}, sent=MemorySeen())
        file = outgoing(tmp_path)
        await sender.send_file(context(tmp_path), file)
        await sender.send_file(context(tmp_path, origin("m2")), file)
        await sender.send_file(context(tmp_path), replace(file, caption="other"))
        await sender.send_file(context(tmp_path, origin(**{CRON_AT: "09:00"})), file)
        assert len(channel.files) == 4

    async def test_a_failed_send_is_not_recorded(
        self, tmp_path: Path, channel: FileChannel
    ) -> None:
        sender = ChatFileSender({"files": channel}, sent=MemorySeen())
        channel.failures.append(ChannelError("HTTP 502"))
        with pytest.raises(ToolError):
            await sender.send_file(context(tmp_path), outgoing(tmp_path))
        assert (await sender.send_file(context(tmp_path), outgoing(tmp_path))).startswith("Sent")


@pytest.mark.parametrize(
    ("size", "shown"), [(999, "999 B"), (120_400, "120 KB"), (2_345_678, "2.3 MB")]
)
def test_size_text(size: int, shown: str) -> None:
    assert size_text(size) == shown


async def test_the_web_chat_gets_a_note_naming_the_path(
    tmp_path: Path, app: Loopgate, dm: ChatDriver, llm: FakeLLM
) -> None:
    workspace_file(tmp_path, "web:alice", "out/plan.md", b"# plan\n")
    llm.script(send_file("out/plan.md", "The plan"), text("Done."))
    await dm.ask("the plan please")
    assert dm.texts() == [
        "The plan\n[file: plan.md, 7 B, in the workspace at out/plan.md — this chat can't show "
        "files]",
        "Done.",
    ]
    assert tool_results(llm)[0].startswith("plan.md (7 B) could not be sent: the web chat")
