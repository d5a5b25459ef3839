"""The Slack adapter's streamed answers, on its own against the fake Slack.

Native streams (``chat.startStream`` / ``appendStream`` / ``stopStream``) in threads: each update
sends only what the preview added, the end sends only the rest (or edits the message when the
final text differs), long answers continue in new messages, and a workspace that can't stream
says so once. The post + edit fallback is :class:`~channels.MessageEditor` (``chat.update``,
``chat.delete``). ``slack.message_history`` holds every text a message showed, so the tests check
every state a user could have seen.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from channels import (
    ChatRef,
    ChatType,
    InboundMessage,
    MessageEditor,
    MessageRef,
    NativeStreaming,
    PlatformStream,
    RetryAfter,
    StreamUnsupported,
)
from channels.slack import SlackChannel, SlackSettings
from channels.slack._streaming import MESSAGE_CHARS, SLACK_MARKDOWN_LIMIT, open_fence
from tests.fakes.slack_events import EventSender, message_event, next_ts
from tests.fakes.slack_server import FakeSlack
from tests.inbound_support import Handler, MemorySeen, webhook_client
from tests.waiting import wait_until


@dataclass
class Adapter:
    channel: SlackChannel
    slack: FakeSlack
    sender: EventSender
    handler: Handler

    async def ask(self, event: dict[str, Any]) -> InboundMessage:
        """Deliver a user's message; returns what the adapter made of it."""
        before = len(self.handler.taken)
        response = await self.sender.send_event(event)
        assert response.status_code == 200, response.text
        await self.handler.wait_for(lambda: len(self.handler.taken) > before)
        return self.handler.taken[-1]

    async def open(self, event: dict[str, Any]) -> tuple[InboundMessage, PlatformStream]:
        msg = await self.ask(event)
        stream = self.channel.open_stream(msg.chat, reply_to=msg.message_id)
        assert stream is not None
        return msg, stream

    def texts(self, method: str, field: str = "markdown_text") -> list[Any]:
        return [c.args.get(field) for c in self.slack.calls_of(method)]


@asynccontextmanager
async def started(slack: FakeSlack, **settings: Any) -> AsyncIterator[Adapter]:
    channel = SlackChannel(
        SlackSettings(
            bot_token=slack.bot_token,
            signing_secret=slack.signing_secret,
            api_base_url=slack.base_url,
            mode="http",
            pace_per_second=None,
            **settings,
        ),
        seen=MemorySeen(),
    )
    handler = Handler()
    await channel.start(handler)
    http = webhook_client(channel.webhook_path, channel.handle_webhook)
    try:
        yield Adapter(channel, slack, EventSender(http, slack.signing_secret), handler)
    finally:
        await http.aclose()
        await channel.stop()


@pytest.fixture
async def adapter(slack: FakeSlack) -> AsyncIterator[Adapter]:
    async with started(slack) as running:
        yield running


@pytest.fixture
async def strict(slack: FakeSlack) -> AsyncIterator[Adapter]:
    """No client-side retries: a 429 or a 5xx reaches the adapter at once."""
    async with started(slack, api_retries=0) as running:
        yield running


def mention(text: str = "<@UBOT> hi", channel: str = "C1") -> dict[str, Any]:
    return message_event(text, channel=channel, user="UALICE")


class TestNativeStream:
    async def test_adapter_offers_editing_and_streaming(self, adapter: Adapter) -> None:
        assert isinstance(adapter.channel, MessageEditor)
        assert isinstance(adapter.channel, NativeStreaming)
        assert adapter.channel.capabilities.edits

    async def test_stream_grows_by_suffixes_and_finishes_in_place(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        event = mention()
        msg, stream = await adapter.open(event)
        await stream.update("Hello")
        await stream.update("Hello, wor")
        await stream.update("Hello, wor")  # unchanged: nothing to send
        await stream.update("Hello, world")
        refs = await stream.finish("Hello, world!")

        (start,) = slack.calls_of("chat.startStream")
        assert start.args["channel"] == "C1"
        assert start.args["thread_ts"] == event["ts"]  # the mention's own thread
        assert (start.args["recipient_user_id"], start.args["recipient_team_id"]) == (
            "UALICE",
            "T1",
        )
        assert start.args["markdown_text"] == "Hello"
        assert adapter.texts("chat.appendStream") == [", wor", "ld"]
        assert adapter.texts("chat.stopStream") == ["!"]
        assert not slack.calls_of("chat.update") and not slack.calls_of("chat.postMessage")

        assert len(refs) == 1 and refs[0].chat == msg.chat
        key = ("C1", refs[0].message_id)
        assert slack.message_history[key] == [
            "Hello",
            "Hello, wor",
            "Hello, world",
            "Hello, world!",
        ]
        assert not slack.is_streaming(*key)
        assert slack.thread_texts("C1", event["ts"]) == ["Hello, world!"]

    async def test_final_text_that_does_not_extend_the_stream_replaces_it(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        _, stream = await adapter.open(mention())
        await stream.update("Draft of the answer")
        (ref,) = await stream.finish("The answer")
        key = ("C1", ref.message_id)
        assert slack.message_history[key] == ["Draft of the answer", "The answer"]
        assert adapter.texts("chat.stopStream") == [None]  # stopped as it was
        assert adapter.texts("chat.update") == ["The answer"]
        methods = [c.method for c in slack.calls if c.method.startswith("chat.")]
        assert methods.index("chat.stopStream") < methods.index("chat.update")

    async def test_a_rewritten_preview_shows_nothing_more_until_the_end(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        _, stream = await adapter.open(mention())
        await stream.update("The cat")
        await stream.update("The dog")  # does not extend what is shown
        await stream.update("The dog sat")  # nor does this: still nothing
        await stream.update("The cat sat")  # extends it again, yet nothing until the end
        (ref,) = await stream.finish("The dog sat down.")
        assert not slack.calls_of("chat.appendStream")
        assert slack.message_history[("C1", ref.message_id)] == ["The cat", "The dog sat down."]

    async def test_dm_assistant_thread_streams_and_its_status_is_cleared(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        thread = next_ts()
        slack.add_thread("D7", [{"ts": thread, "user": "UALICE", "text": "assistant thread"}])
        msg, stream = await adapter.open(message_event("hi", channel="D7", thread_ts=thread))
        key = ("D7", thread)
        await adapter.channel.set_typing(msg.chat)
        assert slack.statuses[key] == "is thinking…"
        await stream.update("Working")
        assert slack.statuses[key] == ""  # Slack clears it when the reply appears
        await adapter.channel.set_typing(msg.chat)  # the run still types: shown again
        assert slack.statuses[key] == "is thinking…"
        await stream.update("Working on it")
        (ref,) = await stream.finish("Working on it: done")
        assert slack.statuses[key] == ""
        assert slack.status_log[-1] == ("D7", thread, "")
        assert slack.thread_texts("D7", thread) == ["Working on it: done"]
        assert slack.calls_of("chat.startStream")[0].args["thread_ts"] == thread
        assert ref.chat == msg.chat

    async def test_nothing_shown_finishes_with_nothing(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        _, stream = await adapter.open(mention())
        await stream.update("")
        assert await stream.finish("Quick answer") == []  # the bot sends it the usual way
        assert not [c for c in slack.calls if c.method.startswith("chat.")]

    async def test_no_stream_outside_a_thread_or_for_an_unknown_asker(
        self, adapter: Adapter
    ) -> None:
        dm = await adapter.ask(message_event("hi", channel="D1"))
        assert dm.chat.thread_id is None
        assert adapter.channel.open_stream(dm.chat, reply_to=dm.message_id) is None
        stranger = ChatRef("slack", "C9", ChatType.GROUP, thread_id=next_ts())
        assert adapter.channel.open_stream(stranger) is None  # a channel stream needs its user


class TestLongAnswers:
    async def test_long_answer_continues_in_new_messages_within_slack_limits(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        paragraphs = [f"Paragraph {i}: " + "word " * 150 for i in range(30)]
        code = (
            "```python\n" + "".join(f"print({i})  # a line of code\n" for i in range(200)) + "```"
        )
        text = "\n\n".join([*paragraphs[:12], code, *paragraphs[12:]])
        assert len(text) > 2.5 * MESSAGE_CHARS
        event = mention()
        _, stream = await adapter.open(event)
        for end in range(700, len(text), 700):
            await stream.update(text[:end])
        refs = await stream.finish(text)

        assert len(refs) >= 3
        assert all(not slack.is_streaming("C1", r.message_id) for r in refs)
        finals = [slack.text_of("C1", r.message_id) or "" for r in refs]
        assert slack.thread_texts("C1", event["ts"]) == finals
        for final in finals:
            assert len(final) <= SLACK_MARKDOWN_LIMIT
            assert open_fence(final) is None  # a code block cut by a message is closed
        for call in slack.calls:
            assert len(str(call.args.get("markdown_text") or "")) <= SLACK_MARKDOWN_LIMIT
        # Every state a user saw grew from the previous one; the last one is the final text.
        for ref, final in zip(refs, finals, strict=True):
            states = slack.message_history[("C1", ref.message_id)]
            assert all(b.startswith(a) for a, b in itertools.pairwise(states))
            assert states[-1] == final
        # Nothing lost or repeated: the messages hold the text (plus reopened code fences).
        fences = sum(final.count("```") for final in finals) - text.count("```")
        assert fences > 0 and fences % 2 == 0
        joined = "".join(finals).replace("```python\n", "").replace("```", "")
        expected = text.replace("```python\n", "").replace("```", "")
        assert "".join(joined.split()) == "".join(expected.split())
        assert not slack.calls_of("chat.update")

    @pytest.mark.parametrize("ended", ["message_not_in_streaming_state", "stopped_by_user"])
    async def test_stream_slack_ended_continues_in_a_new_message(
        self, adapter: Adapter, slack: FakeSlack, ended: str
    ) -> None:
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("Part one")
        (first,) = slack.calls_of("chat.startStream")
        first_ts = _ts_of(slack, event["ts"], 0)
        slack.end_stream("C1", first_ts, ended)
        await stream.update("Part one, part two")
        refs = await stream.finish("Part one, part two.")
        assert [r.message_id for r in refs] == [first_ts, _ts_of(slack, event["ts"], 1)]
        assert slack.thread_texts("C1", event["ts"]) == ["Part one", ", part two."]
        assert first.args["markdown_text"] == "Part one"
        assert slack.message_history[("C1", first_ts)] == ["Part one"]

    async def test_streams_expire_after_their_lifetime(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        slack.stream_lifetime = 0.2
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("Before")
        first_ts = _ts_of(slack, event["ts"], 0)
        await wait_until(lambda: not slack.is_streaming("C1", first_ts))  # its lifetime passed
        slack.stream_lifetime = 300.0
        refs = await stream.finish("Before and after")
        assert len(refs) == 2
        assert slack.thread_texts("C1", event["ts"]) == ["Before", " and after"]


def _ts_of(slack: FakeSlack, thread_ts: str, index: int) -> str:
    replies = [m for m in slack.threads[("C1", thread_ts)] if m.get("bot_id") == slack.bot_id]
    return str(replies[index]["ts"])


class TestUnsupported:
    @pytest.mark.parametrize(
        "error",
        ["unknown_method", "not_allowed_token_type", "feature_not_enabled", "method_deprecated"],
    )
    async def test_workspace_that_cant_stream_is_not_asked_again(
        self, adapter: Adapter, slack: FakeSlack, error: str
    ) -> None:
        slack.streaming_supported, slack.streaming_error = False, error
        msg, stream = await adapter.open(mention())
        with pytest.raises(StreamUnsupported, match=error):
            await stream.update("Hello")
        assert adapter.channel.open_stream(msg.chat, reply_to=msg.message_id) is None
        other = await adapter.ask(mention(channel="C2"))
        assert adapter.channel.open_stream(other.chat, reply_to=other.message_id) is None
        assert len(slack.calls_of("chat.startStream")) == 1
        assert not [m for m in slack.messages.values() if m.get("bot_id") == slack.bot_id]

    @pytest.mark.parametrize("failure", [{"status": 429}, {"status": 503}])
    async def test_a_passing_failure_falls_back_once_only(
        self, strict: Adapter, slack: FakeSlack, failure: dict[str, Any]
    ) -> None:
        slack.fail("chat.startStream", **failure)
        msg, stream = await strict.open(mention())
        with pytest.raises(StreamUnsupported):
            await stream.update("Hello")
        again = strict.channel.open_stream(msg.chat, reply_to=msg.message_id)
        assert again is not None
        await again.update("Hello")
        assert (await again.finish("Hello")) != []
        assert len(slack.calls_of("chat.startStream")) == 2  # not retried by the client

    async def test_a_conversation_that_cant_stream_leaves_others_streaming(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        slack.fail("chat.startStream", error="channel_type_not_supported")
        msg, stream = await adapter.open(mention())
        with pytest.raises(StreamUnsupported):
            await stream.update("Hello")
        assert adapter.channel.open_stream(msg.chat, reply_to=msg.message_id) is None
        other = await adapter.ask(mention(channel="C2"))
        assert adapter.channel.open_stream(other.chat, reply_to=other.message_id) is not None


class TestFailuresMidStream:
    async def test_429_on_append_sends_the_missing_text_with_the_next_update(
        self, strict: Adapter, slack: FakeSlack
    ) -> None:
        _, stream = await strict.open(mention())
        await stream.update("a")
        slack.fail("chat.appendStream", status=429, retry_after=5)
        await stream.update("ab")  # refused: nothing appended, nothing raised
        await stream.update("abc")
        (ref,) = await stream.finish("abcd")
        assert strict.texts("chat.appendStream") == ["b", "bc"]
        assert slack.message_history[("C1", ref.message_id)] == ["a", "abc", "abcd"]

    async def test_append_of_unknown_outcome_is_not_repeated_and_the_end_edits(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        # The client retries 5xx of other methods: an append repeated would show twice.
        _, stream = await adapter.open(mention())
        await stream.update("a")
        slack.fail("chat.appendStream", status=500, after_posting=True)  # appended, yet a 500
        await stream.update("ab")
        await stream.update("abc")  # what is shown is unknown now: no more appends
        (ref,) = await stream.finish("abc!")
        assert adapter.texts("chat.appendStream") == ["b"]
        assert slack.message_history[("C1", ref.message_id)] == ["a", "ab", "abc!"]


class TestDiscard:
    async def test_discard_removes_the_preview(self, adapter: Adapter, slack: FakeSlack) -> None:
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("A preview")
        ts = _ts_of(slack, event["ts"], 0)
        await stream.discard()
        assert ("C1", ts) in slack.deleted
        assert slack.text_of("C1", ts) is None
        assert slack.thread_texts("C1", event["ts"]) == []
        methods = [c.method for c in slack.calls if c.method.startswith("chat.")]
        assert methods[-2:] == ["chat.stopStream", "chat.delete"]

    async def test_a_preview_slack_wont_delete_stays_stopped(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("A preview")
        ts = _ts_of(slack, event["ts"], 0)
        slack.fail("chat.delete", error="cant_delete_message")
        await stream.discard()
        assert slack.text_of("C1", ts) == "A preview"
        assert not slack.is_streaming("C1", ts)

    async def test_discard_with_a_marker_keeps_the_text(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("Half an answer")
        await stream.discard(marker=" (stopped)")
        ts = _ts_of(slack, event["ts"], 0)
        assert slack.message_history[("C1", ts)] == ["Half an answer", "Half an answer (stopped)"]
        assert not slack.is_streaming("C1", ts)
        assert not slack.deleted

    async def test_marker_after_an_open_code_block_closes_it_first(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        event = mention()
        _, stream = await adapter.open(event)
        await stream.update("Try:\n```sh\nls -l")
        await stream.discard(marker=" (stopped)")
        final = slack.thread_texts("C1", event["ts"])[0]
        assert final == "Try:\n```sh\nls -l\n```\n (stopped)"


class TestMessageEditor:
    async def test_edit_and_delete_a_posted_message(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        msg = await adapter.ask(mention())
        ref = await adapter.channel.send_text(msg.chat, "first")
        await adapter.channel.edit_text(ref, "*second*")
        await adapter.channel.edit_text(ref, "*second*")  # the same text again: no error
        key = ("C1", ref.message_id)
        assert slack.message_history[key] == ["first", "*second*", "*second*"]
        assert adapter.texts("chat.update", "text") == ["*second*", "*second*"]
        assert await adapter.channel.delete_message(ref) is True
        assert key in slack.deleted and slack.text_of(*key) is None
        assert await adapter.channel.delete_message(ref) is False  # message_not_found

    async def test_someone_elses_message_is_not_deleted(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        msg = await adapter.ask(mention())
        theirs = MessageRef(chat=msg.chat, message_id=msg.message_id)
        slack.add_thread("C1", [{"ts": msg.message_id, "user": "UALICE", "text": "hi"}])
        assert await adapter.channel.delete_message(theirs) is False
        assert slack.text_of("C1", msg.message_id) == "hi"

    async def test_429_on_edit_is_retry_after(self, strict: Adapter, slack: FakeSlack) -> None:
        msg = await strict.ask(mention())
        ref = await strict.channel.send_text(msg.chat, "first")
        slack.fail("chat.update", status=429, retry_after=3)
        with pytest.raises(RetryAfter) as caught:
            await strict.channel.edit_text(ref, "second")
        assert caught.value.retry_after == 3
        assert slack.message_history[("C1", ref.message_id)] == ["first"]

    async def test_429_on_edit_is_waited_out_by_the_client(
        self, adapter: Adapter, slack: FakeSlack
    ) -> None:
        msg = await adapter.ask(mention())
        ref = await adapter.channel.send_text(msg.chat, "first")
        slack.fail("chat.update", status=429, retry_after=1)
        await adapter.channel.edit_text(ref, "second")
        first, second = slack.calls_of("chat.update")
        assert second.at - first.at >= 1.0
        assert slack.message_history[("C1", ref.message_id)] == ["first", "second"]
