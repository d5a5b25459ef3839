"""bot/pipeline/streaming/edited.py: streaming by send + edit. The channel is an in-memory
editor of our own protocol that records every call and can be told to fail, so each test sees
which API calls a preview costs, how a long answer continues in a new message, and how the end
(finish, discard) cleans up. StreamedReply on top of it is tested in test_reply.py."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

import pytest
from structlog.testing import capture_logs

from bot.pipeline.delivery import MAX_RETRY_AFTER, MAX_SEND_ATTEMPTS
from bot.pipeline.streaming.edited import EditedStream, edit_with_retry
from channels import Capabilities, ChatRef, ChatType, MessageRef, RetryAfter

CHAT = ChatRef("fake", "c1", ChatType.DIRECT)


@dataclass
class Editor:
    """Records ``("send"|"edit"|"delete", message id, text)``; ``edit_failures`` are raised by
    the next edits, one each (None lets that one through)."""

    name: str = "fake"
    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(max_chars=40, formatting="plain", edits=True)
    )
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    replies: list[str | None] = field(default_factory=list)
    edit_failures: deque[BaseException | None] = field(default_factory=deque)
    delete_result: bool | BaseException = True
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        message_id = f"m{next(self._ids)}"
        self.calls.append(("send", message_id, text))
        self.replies.append(reply_to)
        return MessageRef(chat, message_id)

    async def edit_text(self, message: MessageRef, text: str) -> None:
        if self.edit_failures and (failure := self.edit_failures.popleft()) is not None:
            raise failure
        self.calls.append(("edit", message.message_id, text))

    async def delete_message(self, message: MessageRef) -> bool:
        if isinstance(self.delete_result, BaseException):
            raise self.delete_result
        self.calls.append(("delete", message.message_id, ""))
        return self.delete_result

    # Unused by the stream, here for the Channel protocol.
    async def start(self, on_message: object) -> None: ...
    async def stop_receiving(self) -> None: ...
    async def stop(self) -> None: ...
    async def set_typing(self, chat: ChatRef) -> None: ...
    async def add_reaction(self, message: MessageRef, emoji: str) -> None: ...
    async def remove_reaction(self, message: MessageRef, emoji: str) -> None: ...
    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        return False


def stream(editor: Editor, reply_to: str | None = "in-1") -> EditedStream:
    return EditedStream(editor, CHAT, reply_to=reply_to)


WORDS = " ".join(f"word{i}" for i in range(12))  # 70 characters: two messages of 40


async def test_a_growing_preview_is_one_message_edited_in_place() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update("Hello")
    await s.update("Hello there")
    await s.update("Hello there")  # unchanged: no call at all
    assert editor.calls == [("send", "m1", "Hello"), ("edit", "m1", "Hello there")]
    assert editor.replies == ["in-1"]


async def test_a_long_answer_continues_in_a_new_message_and_only_changes_are_edited() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update(WORDS[:30])
    await s.update(WORDS)
    await s.update(WORDS + "!")
    assert editor.calls == [
        ("send", "m1", "word0 word1 word2 word3 word4"),
        ("edit", "m1", "word0 word1 word2 word3 word4 word5"),
        ("send", "m2", "word6 word7 word8 word9 word10 word11"),
        ("edit", "m2", "word6 word7 word8 word9 word10 word11!"),  # the full first one stays
    ]
    assert editor.replies == ["in-1", None]  # only the first message quotes the question
    assert [ref.message_id for ref in s.sent] == ["m1", "m2"]


async def test_would_change_says_whether_any_call_is_needed() -> None:
    s = stream(Editor())
    assert s.would_change("Hi")
    await s.update("Hi")
    assert not s.would_change("Hi")
    assert not s.would_change("Hi\n")  # renders to the same message
    assert s.would_change("Hi!")


async def test_finish_removes_messages_a_shorter_answer_no_longer_needs() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update(WORDS)
    refs = await s.finish("Short after all.")
    assert [r.message_id for r in refs] == ["m1"]
    assert editor.calls[-2:] == [("edit", "m1", "Short after all."), ("delete", "m2", "")]
    assert s.shown == ["Short after all."]


async def test_finish_waits_out_rate_limits_but_a_preview_does_not() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update("one")
    editor.edit_failures.append(RetryAfter(0.01))
    with pytest.raises(RetryAfter):
        await s.update("one two")  # a preview is skipped, the next one catches up
    editor.edit_failures.extend([RetryAfter(0.01), RetryAfter(0.01)])
    await s.finish("one two three")
    assert editor.calls[-1] == ("edit", "m1", "one two three")


async def test_edit_with_retry_gives_up_after_the_last_attempt() -> None:
    editor = Editor()
    editor.edit_failures.extend(RetryAfter(0.01) for _ in range(MAX_SEND_ATTEMPTS))
    with pytest.raises(RetryAfter):
        await edit_with_retry(editor, MessageRef(CHAT, "m1"), "text")
    assert editor.calls == [] and not editor.edit_failures  # every attempt was made


async def test_edit_with_retry_does_not_wait_too_long() -> None:
    editor = Editor()
    editor.edit_failures.append(RetryAfter(MAX_RETRY_AFTER + 1))
    with pytest.raises(RetryAfter):
        await edit_with_retry(editor, MessageRef(CHAT, "m1"), "text")
    assert editor.calls == []


async def test_discard_deletes_everything_sent() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update(WORDS)
    await s.discard()
    assert editor.calls[-2:] == [("delete", "m1", ""), ("delete", "m2", "")]
    assert s.sent == [] and s.shown == []


async def test_discard_with_a_marker_keeps_the_text_and_marks_the_last_message() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update(WORDS)
    await s.discard(marker=" [stopped]")
    assert editor.calls[-1] == ("edit", "m2", s.shown[-1] + " [stopped]")
    assert not [c for c in editor.calls if c[0] == "delete"]


async def test_a_discard_with_nothing_sent_does_nothing() -> None:
    editor = Editor()
    await stream(editor).discard(marker=" [stopped]")
    await stream(editor).discard()
    assert editor.calls == []


async def test_failures_while_cleaning_up_are_logged_not_raised() -> None:
    editor = Editor()
    s = stream(editor)
    await s.update("text")
    editor.edit_failures.append(RuntimeError("edit refused"))
    with capture_logs() as logs:
        await s.discard(marker=" [stopped]")
        editor.delete_result = False
        await s.discard()
        s.sent.append(MessageRef(CHAT, "m9"))
        s.shown.append("x")
        editor.delete_result = RuntimeError("network")
        await s.discard()
    assert [e["event"] for e in logs] == [
        "stream.mark_failed",
        "stream.delete_refused",
        "stream.delete_failed",
    ]
