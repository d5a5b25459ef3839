"""The SSE parser of the streaming providers (agent_core.providers._sse), without any HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import pytest

from agent_core.providers._sse import LineSplitter, ServerSentEvent, SSEDecoder, aiter_sse


async def _chunks(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def events(*chunks: bytes) -> list[ServerSentEvent]:
    return [event async for event in aiter_sse(_chunks(chunks))]


async def test_data_events_end_with_a_blank_line() -> None:
    assert await events(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == [
        ServerSentEvent(data='{"a": 1}'),
        ServerSentEvent(data="[DONE]"),
    ]


async def test_multi_line_data_is_joined_with_newlines() -> None:
    assert await events(b"data: one\ndata:two\ndata:  three\n\n") == [
        ServerSentEvent(data="one\ntwo\n three")  # one optional space after the colon
    ]


async def test_comments_and_unknown_fields_are_ignored() -> None:
    assert await events(b": ping\n\nfoo: bar\ndata: x\n: mid-event comment\n\n") == [
        ServerSentEvent(data="x")
    ]


async def test_event_id_and_retry_fields() -> None:
    got = await events(b"event: error\nid: 7\nretry: 1500\ndata: bad\n\ndata: next\n\n")
    assert got == [
        ServerSentEvent(data="bad", event="error", id="7", retry=1500),
        ServerSentEvent(data="next", id="7"),  # the last id carries over; event and retry not
    ]


async def test_invalid_retry_and_id_with_nul_are_ignored() -> None:
    assert await events(b"retry: soon\nid: a\x00b\ndata: x\n\n") == [ServerSentEvent(data="x")]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
async def test_every_line_ending(ending: bytes) -> None:
    stream = b"data: a" + ending + b"data: b" + ending + ending + b"data: c" + ending + ending
    assert await events(stream) == [ServerSentEvent(data="a\nb"), ServerSentEvent(data="c")]


async def test_split_anywhere_across_chunks() -> None:
    stream = "data: héllo\r\ndata: wörld\r\n\r\n: c\r\ndata: [DONE]\r\n\r\n".encode()
    whole = await events(stream)
    assert whole == [ServerSentEvent(data="héllo\nwörld"), ServerSentEvent(data="[DONE]")]
    for size in (1, 2, 3, 5, 7):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert await events(*pieces) == whole, size


async def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    assert await events(b"data: a\r", b"\n\r", b"\ndata: b\n\n") == [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
    ]


async def test_unfinished_event_at_the_end_is_dropped() -> None:
    assert await events(b"data: a\n\ndata: b\n") == [ServerSentEvent(data="a")]
    assert await events(b"data: a\n\ndata: b") == [ServerSentEvent(data="a")]


async def test_empty_data_field_makes_an_event_with_empty_data() -> None:
    assert await events(b"data\n\n\n\n") == [ServerSentEvent(data="")]


async def test_bad_utf8_is_replaced() -> None:
    assert await events(b"data: \xff\n\n") == [ServerSentEvent(data="\ufffd")]


def test_line_splitter_keeps_partial_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\nde") == [b"abc"]
    assert splitter.feed(b"\r") == [b"de"]
    assert splitter.feed(b"\n") == []
    assert splitter.feed(b"\n") == [b""]


def test_decoder_line_by_line() -> None:
    decoder = SSEDecoder()
    assert decoder.decode("data: x") is None
    assert decoder.decode("") == ServerSentEvent(data="x")
    assert decoder.decode("") is None  # a blank line with nothing pending is no event
