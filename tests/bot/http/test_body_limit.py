"""``BodyLimit``, the ASGI middleware behind ``server.max_body_bytes``: driven directly with
scripted ``receive``/``send`` (to see how much of a body is pulled), and in front of a small
Starlette app through httpx's ASGI transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from bot.http.body_limit import BodyLimit

LIMIT = 10


def http_scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> Scope:
    return {
        "type": "http",
        "method": method,
        "path": "/hook",
        "headers": headers or [],
    }


class Body:
    """A ``receive`` that hands out ``chunks`` one call at a time and counts the calls."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)
        self.pulled = 0

    async def __call__(self) -> Message:
        assert self.pulled < len(self.chunks), "read past the end of the body"
        chunk = self.chunks[self.pulled]
        self.pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": self.pulled < len(self.chunks)}


class Sent:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        (start,) = [m for m in self.messages if m["type"] == "http.response.start"]
        return int(start["status"])

    @property
    def body(self) -> bytes:
        return b"".join(
            m.get("body", b"") for m in self.messages if m["type"] == "http.response.body"
        )


class ReadingApp:
    """Reads the whole body, then answers 200 with how many bytes it got."""

    def __init__(self) -> None:
        self.calls = 0
        self.received = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        more = True
        while more:
            message = await receive()
            self.received += message.get("body", b"")
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(self.received)).encode()})


def declared(size: int | str) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(size).encode())]


async def test_a_body_under_the_limit_reaches_the_app_whole() -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"12345")
    await BodyLimit(app, LIMIT)(http_scope(headers=declared(5)), body, sent)
    assert sent.status == 200
    assert app.received == b"12345"


async def test_a_body_of_exactly_the_limit_passes() -> None:
    app, sent = ReadingApp(), Sent()
    await BodyLimit(app, LIMIT)(http_scope(headers=declared(LIMIT)), Body(b"x" * LIMIT), sent)
    assert sent.status == 200
    assert app.received == b"x" * LIMIT


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"x" * (LIMIT + 1))
    await BodyLimit(app, LIMIT)(http_scope(headers=declared(LIMIT + 1)), body, sent)
    assert sent.status == 413
    assert body.pulled == 0
    assert app.calls == 0
    error = json.loads(sent.body)["error"]
    assert str(LIMIT) in error and "server.max_body_bytes" in error
    start = sent.messages[0]
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(sent.body)
    assert headers[b"connection"] == b"close"


async def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit() -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"aaaa", b"bbbb", b"cccc", b"dddd", b"eeee")  # no Content-Length
    await BodyLimit(app, LIMIT)(http_scope(), body, sent)
    assert sent.status == 413
    assert body.pulled == 3  # 12 bytes > 10: the last two chunks are never read
    # The app saw only what fit; its own response never started.
    assert app.received == b"aaaabbbb"
    assert len([m for m in sent.messages if m["type"] == "http.response.start"]) == 1


async def test_a_chunked_body_under_the_limit_passes() -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"aaa", b"bbb", b"", b"cccc")
    await BodyLimit(app, LIMIT)(http_scope(), body, sent)
    assert sent.status == 200
    assert app.received == b"aaabbbcccc"
    assert body.pulled == 4


async def test_a_body_longer_than_its_declared_length_is_still_counted() -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"x" * 8, b"y" * 8)
    await BodyLimit(app, LIMIT)(http_scope(headers=declared(4)), body, sent)
    assert sent.status == 413
    assert body.pulled == 2


async def test_an_unparsable_content_length_is_counted_as_it_arrives() -> None:
    app, sent = ReadingApp(), Sent()
    await BodyLimit(app, LIMIT)(http_scope(headers=declared("lots")), Body(b"x" * 20), sent)
    assert sent.status == 413


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_put_and_patch_are_limited_too(method: str) -> None:
    app, sent = ReadingApp(), Sent()
    await BodyLimit(app, LIMIT)(http_scope(method), Body(b"x" * 6, b"x" * 6), sent)
    assert sent.status == 413


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD", "OPTIONS"])
async def test_other_methods_are_not_limited(method: str) -> None:
    app, sent = ReadingApp(), Sent()
    body = Body(b"x" * 50, b"y" * 50)
    await BodyLimit(app, LIMIT)(http_scope(method, declared(100)), body, sent)
    assert sent.status == 200
    assert app.received == b"x" * 50 + b"y" * 50


async def test_non_http_scopes_pass_through() -> None:
    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)

    async def receive() -> Message:
        raise AssertionError("not read")

    scope: Scope = {"type": "websocket", "path": "/ws", "headers": []}
    await BodyLimit(app, LIMIT)(scope, receive, Sent())
    await BodyLimit(app, LIMIT)({"type": "lifespan"}, receive, Sent())
    assert [s["type"] for s in seen] == ["websocket", "lifespan"]


async def test_a_response_already_started_is_not_followed_by_a_413() -> None:
    sent = Sent()

    async def streaming_app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while (await receive()).get("more_body"):
            pass

    await BodyLimit(streaming_app, LIMIT)(http_scope(), Body(b"x" * 6, b"x" * 6, b"x"), sent)
    assert sent.status == 200  # exactly one start: no 413 after the app's own
    assert [m["type"] for m in sent.messages] == ["http.response.start"]


async def test_an_app_error_other_than_the_limit_propagates() -> None:
    async def failing_app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await BodyLimit(failing_app, LIMIT)(http_scope(), Body(b"x"), Sent())


# Through Starlette and httpx, as the server uses it.


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"length": len(await request.body())})


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(
        routes=[Route("/hook", echo, methods=["GET", "POST"])],
        middleware=[Middleware(BodyLimit, max_bytes=LIMIT)],
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_starlette_post_under_the_limit(client: httpx.AsyncClient) -> None:
    response = await client.post("/hook", content=b"x" * LIMIT)
    assert response.status_code == 200
    assert response.json() == {"length": LIMIT}


async def test_starlette_post_over_the_limit(client: httpx.AsyncClient) -> None:
    response = await client.post("/hook", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413
    assert "server.max_body_bytes" in response.json()["error"]


async def test_starlette_chunked_post_over_the_limit(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * 4

    response = await client.post("/hook", content=chunks())
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert "server.max_body_bytes" in response.json()["error"]


async def test_starlette_get_is_not_limited(client: httpx.AsyncClient) -> None:
    response = await client.request("GET", "/hook", content=b"x" * (LIMIT * 10))
    assert response.status_code == 200
    assert response.json() == {"length": LIMIT * 10}
