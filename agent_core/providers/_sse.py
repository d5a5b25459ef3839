"""Server-Sent Events parsing for streamed model answers, independent of the HTTP client.

Feed it the raw body bytes as they arrive (``aiohttp``'s ``response.content.iter_any()``, or
any async iterable of ``bytes``) and get :class:`ServerSentEvent` objects back, per the
WHATWG spec: lines end with ``\\r\\n``, ``\\r`` or ``\\n``; ``field: value`` lines (one optional
space after the colon); ``data`` lines of one event are joined with ``\\n``; a blank line ends
an event; lines starting with ``:`` are comments. An event cut off by the end of the stream
(no blank line after it) is dropped, as the spec says. What ``[DONE]`` means is the caller's
business.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["LineSplitter", "SSEDecoder", "ServerSentEvent", "aiter_sse"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str = ""
    event: str = "message"
    id: str = ""
    retry: int | None = None


class LineSplitter:
    """Bytes in, complete lines out (without their ending), across chunk boundaries."""

    __slots__ = ("_partial", "_skip_lf")

    def __init__(self) -> None:
        self._partial = b""
        self._skip_lf = False  # the last chunk ended in "\r": a "\n" next belongs to it

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            return []
        if self._partial:
            chunk = self._partial + chunk
            self._partial = b""
        # bytes.splitlines splits on exactly \r\n, \r and \n (unlike str.splitlines).
        lines = chunk.splitlines()
        last = chunk[-1]
        if last == 0x0D:  # "\r"
            self._skip_lf = True
        elif last != 0x0A:  # no line ending yet: keep the tail for the next chunk
            self._partial = lines.pop()
        return lines


class SSEDecoder:
    """Lines in, events out: :meth:`decode` returns an event when a blank line ends one."""

    __slots__ = ("_data", "_event", "_last_event_id", "_retry")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._last_event_id = ""
        self._retry: int | None = None

    def decode(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not (self._event or self._data or self._last_event_id) and self._retry is None:
                return None
            event = ServerSentEvent(
                data="\n".join(self._data),
                event=self._event or "message",
                id=self._last_event_id,
                retry=self._retry,
            )
            self._event = ""
            self._data = []
            self._retry = None  # the last event id carries over, as the spec says
            return event
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_event_id = value
        elif name == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)
        return None


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The events of a byte stream, in order (text is UTF-8; bad bytes become U+FFFD)."""
    splitter = LineSplitter()
    decoder = SSEDecoder()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            event = decoder.decode(line.decode("utf-8", "replace"))
            if event is not None:
                yield event
    # A last line without an ending cannot be the blank line that would end an event.
