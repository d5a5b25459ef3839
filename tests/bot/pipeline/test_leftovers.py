"""``bot/pipeline/leftovers.py``: a killed process's previews and the chunk in doubt."""

from __future__ import annotations

import uuid
from pathlib import Path

from bot.pipeline.job import Job
from bot.pipeline.leftovers import remove_previews, sent_lookup
from bot.pipeline.reactions import StatusReactions
from channels import ChatRef, MessageRef
from tests.pipeline_support import DM, RecordingChannel, message, sqlite_inbox


class Editor(RecordingChannel):
    def __init__(self, *, refuse: str = "", fail: str = "") -> None:
        super().__init__()
        self.deleted: list[str] = []
        self.refuse, self.fail = refuse, fail

    async def edit_text(self, message: MessageRef, text: str) -> None:
        raise AssertionError("nothing is edited here")

    async def delete_message(self, message: MessageRef) -> bool:
        if message.message_id == self.fail:
            raise OSError("network down")
        self.deleted.append(message.message_id)
        return message.message_id != self.refuse


class Asker(RecordingChannel):
    """A channel that can be asked whether a message went out (as Slack can)."""

    def __init__(self, found: str | None = None, *, fail: bool = False) -> None:
        super().__init__()
        self.found, self.fail = found, fail
        self.asked: list[tuple[ChatRef, str, float, str | None]] = []

    async def find_sent(
        self, chat: ChatRef, text: str, *, since: float, reply_to: str | None = None
    ) -> MessageRef | None:
        self.asked.append((chat, text, since, reply_to))
        if self.fail:
            raise OSError("no history scope")
        return None if self.found is None else MessageRef(chat, self.found)


def job(channel: RecordingChannel, **fields: object) -> Job:
    msg = message("hi", message_id="m-1")
    return Job(
        message=msg,
        agent_id="main",
        session_key="s",
        concurrency=1,
        run_id=uuid.uuid4().hex,
        reactions=StatusReactions(channel, MessageRef(DM, "m-1")),
        **fields,  # type: ignore[arg-type]
    )


class TestRemovePreviews:
    async def test_each_is_deleted_and_the_record_cleared(self, tmp_path: Path) -> None:
        channel = Editor(refuse="p-2", fail="p-3")
        async with sqlite_inbox(tmp_path) as inbox:
            the_job = job(channel, previews=["p-1", "p-2", "p-3"])
            the_job.inbox_id = await inbox.add(the_job.message, session_key="s", agent_id="main")
            await inbox.set_previews(the_job.inbox_id, ["p-1", "p-2", "p-3"])
            await remove_previews(the_job, channel, inbox)
            entry = await inbox.get(the_job.inbox_id)
        # A refusal or a failure does not stop the others from going.
        assert channel.deleted == ["p-1", "p-2"]
        assert the_job.previews == [] and entry is not None and entry.previews == []

    async def test_a_channel_that_cannot_delete_leaves_them(self) -> None:
        channel = RecordingChannel()
        the_job = job(channel, previews=["p-1"])
        await remove_previews(the_job, channel, None)
        assert the_job.previews == [] and channel.records == []


class TestSentLookup:
    async def test_nothing_to_ask_without_a_saved_answer_or_a_platform_to_ask(self) -> None:
        assert sent_lookup(job(Asker()), Asker()) is None  # nothing saved: a fresh answer
        assert sent_lookup(job(RecordingChannel(), saved_at=1.0), RecordingChannel()) is None

    async def test_a_message_found_counts_as_the_chunk(self) -> None:
        channel = Asker(found="1700.5")
        was_sent = sent_lookup(job(channel, saved_at=1700.0), channel)
        assert was_sent is not None
        found = await was_sent("the answer", "m-1")
        assert found == MessageRef(DM, "1700.5")
        assert channel.asked == [(DM, "the answer", 1700.0, "m-1")]

    async def test_a_failed_look_sends_again_rather_than_never(self) -> None:
        channel = Asker(fail=True)
        was_sent = sent_lookup(job(channel, saved_at=1700.0), channel)
        assert was_sent is not None and await was_sent("the answer", None) is None
