"""channels/downloads.py against a small real HTTP server: the size limit from the stated
length and while reading, HTTP errors, a sign-in page instead of the file."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from channels import ChannelError, FileTooLarge
from channels.downloads import download
from tests.fakes.server import FakeServer

BODY = bytes(range(256)) * 64  # 16 KiB


class Files(FakeServer):
    name = "Files"

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []

    def app(self) -> Starlette:
        async def stated(request: Request) -> Response:
            self.headers.append(dict(request.headers))
            return Response(BODY, media_type="application/octet-stream")

        async def unstated(request: Request) -> Response:
            async def chunks() -> AsyncIterator[bytes]:
                for i in range(0, len(BODY), 1024):
                    yield BODY[i : i + 1024]

            return StreamingResponse(chunks(), media_type="application/octet-stream")

        async def missing(request: Request) -> Response:
            return Response("gone", status_code=404)

        async def page(request: Request) -> Response:
            return HTMLResponse("<html>Sign in</html>")

        return Starlette(
            routes=[
                Route("/stated", stated),
                Route("/unstated", unstated),
                Route("/missing", missing),
                Route("/page", page),
            ]
        )


@pytest.fixture
async def files() -> AsyncIterator[Files]:
    async with Files() as server:
        yield server


async def test_the_body_and_the_headers(files: Files) -> None:
    got = await download(f"{files.base_url}/stated", headers={"Authorization": "Bearer t"})
    assert got == BODY
    assert files.headers[0]["authorization"] == "Bearer t"


async def test_a_stated_length_over_the_limit_is_refused_before_reading(files: Files) -> None:
    with pytest.raises(FileTooLarge) as caught:
        await download(f"{files.base_url}/stated", max_bytes=1000)
    assert caught.value.size == len(BODY)


async def test_an_unstated_length_is_cut_off_while_reading(files: Files) -> None:
    with pytest.raises(FileTooLarge) as caught:
        await download(f"{files.base_url}/unstated", max_bytes=3000)
    assert 3000 < caught.value.size <= 3000 + 64 * 1024
    assert await download(f"{files.base_url}/unstated", max_bytes=len(BODY)) == BODY


async def test_http_errors_and_pages(files: Files) -> None:
    with pytest.raises(ChannelError, match="HTTP 404"):
        await download(f"{files.base_url}/missing")
    assert await download(f"{files.base_url}/page") == b"<html>Sign in</html>"
    with pytest.raises(ChannelError, match="web page"):
        await download(f"{files.base_url}/page", html_is_error=True)
    with pytest.raises(ChannelError, match="download failed"):
        await download("http://127.0.0.1:9/nothing")
