"""A real-HTTP fake of "some web site", for web_fetch: pages, redirects, endless and stalled
bodies, on 127.0.0.1 (HTTPS with a trustme certificate when given one)::

    async with FakeWeb() as web:
        web.page("/a", "<html>...</html>")
        web.redirect("/old", "/a")
        ... fetch web.url("/old") with allow_hosts ["127.0.0.1"] ...
        assert [r.path for r in web.requests] == ["/old", "/a"]

Every request is recorded with the ``Host`` header it carried, so a test sees which name a
pinned connection spoke for, and that a refused destination got no request at all.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.server import FakeServer

__all__ = ["FakeWeb", "Page", "Seen"]


@dataclass(frozen=True)
class Page:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    endless: bool = False  # streams chunks until the client goes away
    stall: bool = False  # sends headers and one chunk, then nothing until the fake stops


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    host: str
    headers: dict[str, str]


class FakeWeb(FakeServer):
    name = "FakeWeb"

    def __init__(self, *, certfile: str | None = None, keyfile: str | None = None) -> None:
        super().__init__()
        self.pages: dict[str, Page] = {}
        self.requests: list[Seen] = []
        self._tls = (certfile, keyfile)

    def server_options(self) -> dict[str, Any]:
        certfile, keyfile = self._tls
        return {"ssl_certfile": certfile, "ssl_keyfile": keyfile} if certfile else {}

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self._tls[0] else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def page(
        self,
        path: str,
        body: str | bytes,
        content_type: str = "text/html; charset=utf-8",
        *,
        status: int = 200,
        **flags: Any,
    ) -> None:
        raw = body.encode() if isinstance(body, str) else body
        self.pages[path] = Page(raw, content_type, status, **flags)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.pages[path] = Page(b"", "text/plain", status, {"Location": location})

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            path = request.url.path
            self.requests.append(
                Seen(request.method, path, request.headers.get("host", ""), dict(request.headers))
            )
            self.changed()
            page = self.pages.get(path)
            if page is None:
                return Response("not found", 404, media_type="text/plain")
            if page.endless or page.stall:
                return StreamingResponse(
                    self._stream(page), page.status, page.headers, page.content_type
                )
            return Response(page.body, page.status, page.headers, page.content_type)

        methods = ["GET", "POST", "HEAD"]
        return Starlette(routes=[Route("/{path:path}", serve, methods=methods)])

    async def _stream(self, page: Page) -> Any:
        chunk = b"x" * 65536
        if page.stall:
            yield chunk
            await self.closing.wait()
            return
        while not self.closing.is_set():
            yield chunk
            await asyncio.sleep(0)  # let the client's disconnect reach us
