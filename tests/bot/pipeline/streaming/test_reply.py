"""The streaming driver (bot/pipeline/streaming/) alone: run events in, what a user could see out.

The channel here is an in-memory editor that records every state of every message, so the tests
assert on each visible state, not only on the end. The platform adapters themselves are tested
against the fake Telegram and Slack servers (test_telegram_streaming.py, test_slack_streaming.py)
and end to end in test_streaming_e2e.py.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from agent_core import Event, EventType
from agent_core.stream_sanitize import safe_preview
from bot.pipeline.streaming import StreamedReply, StreamOptions
from bot.pipeline.streaming.reply import StreamClock
from channels import Capabilities, ChatRef, ChatType, MessageRef
from tests.waiting import wait_until

CHAT = ChatRef("fake", "c1", ChatType.DIRECT)


@dataclass
class EditorChannel:
    """Sends, edits and deletes in memory; ``history`` has every text each message showed."""

    name: str = "fake"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(max_chars=100, formatting="plain", edits=True)
    )
    history: dict[str, list[str]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    edit_times: list[float] = field(default_factory=list)
    can_delete: bool = True
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        message_id = str(next(self._ids))
        self.history[message_id] = [text]
        return MessageRef(chat, message_id)

    async def edit_text(self, message: MessageRef, text: str) -> None:
        self.edit_times.append(time.monotonic())
        self.history[message.message_id].append(text)

    async def delete_message(self, message: MessageRef) -> bool:
        if self.can_delete:
            self.deleted.append(message.message_id)
        return self.can_delete

    def visible(self) -> list[str]:
        return [h[-1] for k, h in self.history.items() if k not in self.deleted]

    def every_state(self) -> list[str]:
        return [text for states in self.history.values() for text in states]


def reply(channel: EditorChannel, **options: object) -> StreamedReply:
    opts = StreamOptions(**{"interval": 0.05, **options})  # type: ignore[arg-type]
    return StreamedReply(channel, CHAT, "run-1", options=opts, clock=StreamClock())  # type: ignore[arg-type]


def chunk(text: str) -> Event:
    return Event(EventType.CHUNK, "run-1", "s", {"content": text})


async def feed(streamed: StreamedReply, pieces: list[str], pause: float = 0.02) -> None:
    for piece in pieces:
        await streamed.on_event(chunk(piece))
        await asyncio.sleep(pause)  # kept: a model streaming at its own pace


async def test_the_answer_grows_then_ends_as_the_final_text() -> None:
    channel = EditorChannel()
    streamed = reply(channel)
    await feed(streamed, ["Hello", " there,", " how", " are", " you?"], pause=0.03)
    sent = await streamed.finish("Hello there, how are you?")
    assert sent is not None and len(sent) == 1
    states = channel.history[sent[0].message_id]
    assert states[0].startswith("Hello") and states[-1] == "Hello there, how are you?"
    assert len(states) >= 2  # it grew in place before the end


async def test_edits_respect_the_interval() -> None:
    channel = EditorChannel()
    streamed = reply(channel, interval=0.1)
    await feed(streamed, [f"word{i} " for i in range(30)], pause=0.01)
    await streamed.finish("done")
    gaps = [b - a for a, b in itertools.pairwise(channel.edit_times)]
    assert gaps and min(gaps) >= 0.09  # the final edit keeps to the interval too


async def test_no_reply_is_never_visible_and_leaves_nothing() -> None:
    channel = EditorChannel()
    streamed = reply(channel)
    await feed(streamed, ["N", "O_", "REP", "LY"])
    await streamed.abandon()
    assert channel.history == {}


async def test_hidden_thinking_is_never_visible_even_for_one_edit() -> None:
    channel = EditorChannel()
    streamed = reply(channel)
    pieces = ["Sure. ", "<th", "ink>", "secret ", "plan", "</thi", "nk>", " Here", " it is."]
    await feed(streamed, pieces)
    sent = await streamed.finish("Sure. Here it is.")
    assert sent is not None
    assert all("secret" not in s and "<" not in s for s in channel.every_state())


async def test_a_preview_of_a_silent_run_is_deleted_or_kept_safe() -> None:
    channel = EditorChannel()
    streamed = reply(channel)
    await feed(streamed, ["Some text that turns out unwanted"], pause=0.1)
    assert channel.visible() == ["Some text that turns out unwanted"]
    await streamed.abandon()
    assert channel.visible() == []

    undeletable = EditorChannel(can_delete=False)
    streamed = reply(undeletable)
    await feed(streamed, ["Partial answer"], pause=0.1)
    await streamed.abandon()
    assert undeletable.visible() == ["Partial answer"]  # the last safe text, nothing more


async def test_stop_marks_or_deletes_per_option() -> None:
    channel = EditorChannel()
    streamed = reply(channel, on_stop="mark")
    await feed(streamed, ["Half an answer"], pause=0.1)
    await streamed.abandon(stopped=True)
    assert channel.visible() == ["Half an answer (stopped)"]

    channel = EditorChannel()
    streamed = reply(channel, on_stop="delete")
    await feed(streamed, ["Half an answer"], pause=0.1)
    await streamed.abandon(stopped=True)
    assert channel.visible() == []


async def test_overflow_continues_in_a_new_message() -> None:
    channel = EditorChannel()  # 100 characters per message
    streamed = reply(channel)
    words = [f"w{i:03d} " for i in range(60)]  # 300 characters
    await feed(streamed, words, pause=0.005)
    final = "".join(words).strip()
    sent = await streamed.finish(final)
    assert sent is not None and len(sent) >= 3
    assert all(len(s) <= 100 for s in channel.every_state())
    assert " ".join(channel.visible()).split() == final.split()


async def test_block_replies_stay_or_go_per_option() -> None:
    for keep in (True, False):
        channel = EditorChannel()
        streamed = reply(channel, block_replies=keep)
        await feed(streamed, ["Let me check the files."], pause=0.1)
        await streamed.on_event(
            Event(EventType.BLOCK_REPLY, "run-1", "s", {"content": "Let me check the files."})
        )
        await streamed.on_event(Event(EventType.ACTIVITY, "run-1", "s", {"phase": "thinking"}))
        await feed(streamed, ["Found 3 files."], pause=0.1)
        await streamed.finish("Found 3 files.")
        expected = ["Let me check the files.", "Found 3 files."] if keep else ["Found 3 files."]
        assert channel.visible() == expected


async def test_an_instant_answer_is_not_streamed() -> None:
    channel = EditorChannel()
    streamed = reply(channel)
    await streamed.on_event(chunk("Quick answer"))  # finish comes before any update
    assert await streamed.finish("Quick answer") is None  # the caller delivers it whole
    assert channel.history == {}


def test_safe_preview_holds_back_what_may_still_be_hidden() -> None:
    assert safe_preview("NO_REP") == ""
    assert safe_preview("Hello <thi") == "Hello"
    assert safe_preview("Hello <think>plan") == "Hello"
    assert safe_preview("x < y") == "x < y"
    assert safe_preview("ok\n[Tool Ca") == "ok"
    assert safe_preview("para\n\npar") == "para"


@dataclass
class GatedEditor(EditorChannel):
    """An editor whose edits wait for ``gate``: a preview update stays in flight."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    editing: asyncio.Event = field(default_factory=asyncio.Event)

    async def edit_text(self, message: MessageRef, text: str) -> None:
        self.editing.set()
        await self.gate.wait()
        await super().edit_text(message, text)


async def test_an_update_in_flight_at_the_end_leaves_one_message() -> None:
    # The preview's edit is still on its way when the run ends, and more text came meanwhile:
    # the update must not schedule another one that posts the answer again after ``finish``.
    channel = GatedEditor()
    streamed = reply(channel)
    await streamed.on_event(chunk("Hello"))
    await wait_until(lambda: channel.visible() == ["Hello"], 5)
    await streamed.on_event(chunk(" world"))
    await asyncio.wait_for(channel.editing.wait(), 5)  # the edit to "Hello world" is in flight
    await streamed.on_event(chunk(" again"))
    finishing = asyncio.create_task(streamed.finish("Hello world again"))
    channel.gate.set()
    sent = await asyncio.wait_for(finishing, 5)
    assert sent is not None and len(sent) == 1
    await asyncio.sleep(0.2)  # kept (negative check): four intervals, and no late preview comes
    await streamed.close()
    assert channel.visible() == ["Hello world again"]
    assert len(channel.history) == 1


async def test_each_preview_message_is_reported_once_when_posted() -> None:
    """The inbox records them, so a replay after a kill can delete the half answer."""
    channel = EditorChannel()  # 100 characters per message: the preview spills into a second
    reports: list[list[str]] = []

    async def on_posted(ids: list[str]) -> None:
        reports.append(ids)

    opts = StreamOptions(interval=0.01)
    streamed = StreamedReply(
        channel,  # type: ignore[arg-type]
        CHAT,
        "run-1",
        options=opts,
        clock=StreamClock(),
        on_posted=on_posted,
    )
    await feed(streamed, ["word " * 5] * 6, pause=0.03)
    await wait_until(lambda: len(channel.history) == 2)
    await wait_until(lambda: len(reports) == 2)
    assert reports == [["1"], ["1", "2"]]  # edits of a posted message report nothing new
    await streamed.close()


async def test_a_failing_report_leaves_the_preview_streaming() -> None:
    channel = EditorChannel()

    async def on_posted(ids: list[str]) -> None:
        raise OSError("database down")

    streamed = StreamedReply(
        channel,  # type: ignore[arg-type]
        CHAT,
        "run-1",
        options=StreamOptions(interval=0.01),
        clock=StreamClock(),
        on_posted=on_posted,
    )
    await feed(streamed, ["Hello", " there"], pause=0.03)
    sent = await streamed.finish("Hello there")
    assert sent is not None and channel.visible() == ["Hello there"]
