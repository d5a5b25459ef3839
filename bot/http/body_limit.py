"""``server.max_body_bytes`` on every POST: counted while reading, 413 past it.

A pure ASGI middleware: a declared ``Content-Length`` over the limit is refused before a byte
of the body is read; a chunked body is counted as it arrives and refused as soon as it passes
the limit, so nothing past it is buffered. Routes parse (and check signatures) only bodies that
fit. Logged once per request, without the content.
"""

from __future__ import annotations

import json

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.errors import BotError

log = structlog.get_logger(__name__)

LIMITED_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _TooLarge(BotError):
    pass


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in LIMITED_METHODS:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            self._log(scope, declared=declared)
            await self._refuse(send)
            return
        read = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracking_send)
        except _TooLarge:
            self._log(scope, read=read)
            if not started:
                await self._refuse(send)

    def _log(self, scope: Scope, **sizes: int) -> None:
        log.warning("http.body_too_large", path=scope["path"], limit=self.max_bytes, **sizes)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"error": f"request body larger than {self.max_bytes} bytes (server.max_body_bytes)"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
