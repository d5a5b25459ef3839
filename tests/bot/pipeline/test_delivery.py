"""``bot/pipeline/delivery.py`` alone: ``deliver`` (NO_REPLY, chunking, resume after a crash)
and ``send_with_retry`` (a platform's RetryAfter), against a recording channel."""

from __future__ import annotations

import pytest

from bot.pipeline.chunking import render_chunks
from bot.pipeline.delivery import MAX_RETRY_AFTER, MAX_SEND_ATTEMPTS, deliver, send_with_retry
from channels import Capabilities, Forbidden, MessageRef, RetryAfter
from tests.pipeline_support import DM, RecordingChannel

LONG = "\n\n".join(f"Paragraph {i}: " + "word " * 50 for i in range(6))


def small_channel() -> RecordingChannel:
    return RecordingChannel(capabilities=Capabilities(max_chars=300))


class Recorder:
    """``before_first`` and ``on_sent`` callbacks that record their calls."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.sent: list[tuple[str, bool]] = []

    async def before_first(self, chunks: int) -> None:
        self.counts.append(chunks)

    async def on_sent(self, message_id: str, last: bool) -> None:
        self.sent.append((message_id, last))


class TestDeliver:
    async def test_a_long_answer_goes_out_in_chunks_within_the_limit(self) -> None:
        channel, calls = small_channel(), Recorder()
        expected = render_chunks(LONG, "markdown", 300)
        assert len(expected) > 2
        refs = await deliver(
            channel,
            DM,
            LONG,
            reply_to="m-1",
            before_first=calls.before_first,
            on_sent=calls.on_sent,
        )
        assert channel.texts() == expected
        assert all(len(text) <= 300 for text in channel.texts())
        assert "".join("".join(channel.texts()).split()) == "".join(LONG.split())
        # Only the first chunk quotes the user's message.
        assert [r.reply_to for r in channel.messages()] == ["m-1"] + [None] * (len(expected) - 1)
        assert [ref.message_id for ref in refs] == [r.message_id for r in channel.messages()]
        assert calls.counts == [len(expected)]  # told before anything went out
        assert calls.sent == [(ref.message_id, i == len(refs) - 1) for i, ref in enumerate(refs)]

    async def test_a_chunk_a_killed_process_sent_is_counted_not_sent_again(self) -> None:
        channel, calls = small_channel(), Recorder()
        expected = render_chunks(LONG, "markdown", 300)
        asked: list[tuple[str, str | None]] = []

        async def was_sent(text: str, quote: str | None) -> MessageRef | None:
            asked.append((text, quote))
            return MessageRef(DM, "landed-2")

        refs = await deliver(
            channel, DM, LONG, reply_to="m-1", skip=1, on_sent=calls.on_sent, was_sent=was_sent
        )
        assert asked == [(expected[1], None)]  # only the chunk in doubt is asked about
        assert channel.texts() == expected[2:]
        assert calls.sent[0] == ("landed-2", False)
        assert refs[0].message_id == "landed-2"

    async def test_a_chunk_nobody_sent_is_sent(self) -> None:
        channel = small_channel()

        async def was_sent(text: str, quote: str | None) -> MessageRef | None:
            return None

        await deliver(channel, DM, "Hello!", reply_to="m-1", was_sent=was_sent)
        assert [(r.text, r.reply_to) for r in channel.messages()] == [("Hello!", "m-1")]

    async def test_a_short_answer_is_one_message(self) -> None:
        channel, calls = small_channel(), Recorder()
        refs = await deliver(channel, DM, "Hello!", before_first=calls.before_first)
        assert channel.texts() == ["Hello!"] and len(refs) == 1
        assert calls.counts == [1]

    @pytest.mark.parametrize("text", ["NO_REPLY", "  NO_REPLY\n", "", "   "])
    async def test_no_reply_or_empty_sends_nothing(self, text: str) -> None:
        channel, calls = small_channel(), Recorder()
        refs = await deliver(
            channel, DM, text, before_first=calls.before_first, on_sent=calls.on_sent
        )
        assert refs == [] and channel.records == []
        assert calls.counts == [] and calls.sent == []

    async def test_before_first_failing_sends_nothing(self) -> None:
        channel = small_channel()

        async def refuse(chunks: int) -> None:
            raise RuntimeError("entry taken over")

        with pytest.raises(RuntimeError):
            await deliver(channel, DM, LONG, before_first=refuse)
        assert channel.records == []

    async def test_a_transient_error_is_retried_and_nothing_is_sent_twice(self) -> None:
        channel = small_channel()
        expected = render_chunks(LONG, "markdown", 300)
        # The second chunk is refused once with a short RetryAfter.
        channel.failures.extend([None, RetryAfter(0.01)])
        await deliver(channel, DM, LONG)
        assert channel.texts() == expected
        assert channel.send_attempts == len(expected) + 1

    async def test_resume_after_a_failure_sends_only_the_missing_chunks(self) -> None:
        channel, calls = small_channel(), Recorder()
        expected = render_chunks(LONG, "markdown", 300)
        channel.failures.extend([None, None, Forbidden("blocked")])
        with pytest.raises(Forbidden):
            await deliver(channel, DM, LONG, reply_to="m-1", on_sent=calls.on_sent)
        assert channel.texts() == expected[:2]
        assert [last for _, last in calls.sent] == [False, False]  # never marked as done

        # The next attempt (a replay) skips what went out: the same text, the same chunks.
        resumed = Recorder()
        refs = await deliver(
            channel,
            DM,
            LONG,
            reply_to="m-1",
            skip=len(calls.sent),
            before_first=resumed.before_first,
            on_sent=resumed.on_sent,
        )
        assert channel.texts() == expected  # each chunk exactly once, in order
        assert len(refs) == len(expected) - 2
        assert resumed.counts == [len(expected)]
        assert [last for _, last in resumed.sent] == [False] * (len(refs) - 1) + [True]
        # A resumed chunk is not the first: it quotes nothing.
        assert [r.reply_to for r in channel.messages()[2:]] == [None] * len(refs)

    async def test_resume_when_everything_was_sent_sends_nothing(self) -> None:
        channel, calls = small_channel(), Recorder()
        chunks = len(render_chunks(LONG, "markdown", 300))
        refs = await deliver(channel, DM, LONG, skip=chunks, on_sent=calls.on_sent)
        assert refs == [] and channel.records == [] and calls.sent == []


class TestSendWithRetry:
    async def test_sends_once_when_the_platform_takes_it(self) -> None:
        channel = small_channel()
        ref = await send_with_retry(channel, DM, "hi", reply_to="m-1")
        assert channel.messages() == [channel.records[0]]
        assert (channel.records[0].text, channel.records[0].reply_to) == ("hi", "m-1")
        assert ref.message_id == channel.records[0].message_id

    async def test_retry_after_is_waited_out_and_retried(self) -> None:
        channel = small_channel()
        channel.failures.extend([RetryAfter(0.01)] * (MAX_SEND_ATTEMPTS - 1))
        ref = await send_with_retry(channel, DM, "hi")
        assert channel.texts() == ["hi"] and ref.message_id == channel.records[0].message_id
        assert channel.send_attempts == MAX_SEND_ATTEMPTS

    async def test_gives_up_after_the_last_attempt(self) -> None:
        channel = small_channel()
        channel.failures.extend([RetryAfter(0.01)] * (MAX_SEND_ATTEMPTS + 1))
        with pytest.raises(RetryAfter):
            await send_with_retry(channel, DM, "hi")
        assert channel.send_attempts == MAX_SEND_ATTEMPTS and channel.records == []

    async def test_a_wait_too_long_is_not_waited(self) -> None:
        channel = small_channel()
        channel.failures.append(RetryAfter(MAX_RETRY_AFTER + 1))
        with pytest.raises(RetryAfter):
            await send_with_retry(channel, DM, "hi")
        assert channel.send_attempts == 1

    async def test_other_errors_are_not_retried(self) -> None:
        # It may have been delivered: a retry could duplicate it.
        channel = small_channel()
        channel.failures.append(Forbidden("kicked"))
        with pytest.raises(Forbidden):
            await send_with_retry(channel, DM, "hi")
        assert channel.send_attempts == 1
