"""Real-HTTP fakes of the search APIs web_search speaks, on 127.0.0.1, one app for all three:

* Brave: ``GET /res/v1/web/search?q=&count=`` with ``X-Subscription-Token``, answering
  ``{"web": {"results": [{"title", "url", "description"}]}}`` (query words in ``<strong>``);
* Tavily: ``POST /search`` with ``Authorization: Bearer``, JSON ``{"query", "max_results"}``,
  answering ``{"results": [{"title", "url", "content", "score"}]}``;
* SearXNG: ``GET /search?q=&format=json``, answering ``{"results": [{"title", "url",
  "content"}]}`` (no count parameter: it answers a page of results).

``fail(status, times=N, retry_after=..., body=...)`` answers the next N searches with that error
(Brave's 429 body: ``{"type": "ErrorResponse", "error": {"detail", "status", "code"}}``)::

    async with FakeSearch() as api:
        api.fail(429, retry_after="0")
        ... brave search against api.base_url ...
        assert len(api.calls) == 2
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import FakeServer

__all__ = ["Call", "FakeSearch"]

DEFAULT_RESULTS = [
    {
        "title": "Solar sail - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/Solar_sail",
        "snippet": "Solar sails use radiation pressure exerted by sunlight on large mirrors.",
    },
    {
        "title": "How solar sails work",
        "url": "https://www.planetary.org/sail",
        "snippet": "A solar sail is a sheet of reflective material pushed by light.",
    },
    {
        "title": "IKAROS",
        "url": "https://global.jaxa.jp/projects/ikaros",
        "snippet": "The first spacecraft to use solar sailing in interplanetary space.",
    },
]


@dataclass(frozen=True)
class Call:
    provider: str
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    json: Any = None


@dataclass
class _Failure:
    status: int
    times: int
    retry_after: str | None
    body: Any = field(default=None)


class FakeSearch(FakeServer):
    name = "FakeSearch"

    def __init__(self) -> None:
        super().__init__()
        self.results: list[dict[str, str]] = list(DEFAULT_RESULTS)
        self.calls: list[Call] = []
        self._failures: list[_Failure] = []

    def fail(
        self, status: int, *, times: int = 1, retry_after: str | None = None, body: Any = None
    ) -> None:
        self._failures.append(_Failure(status, times, retry_after, body))

    def timeout_detail(self) -> str:
        return f"calls: {self.calls[-3:]}"

    def app(self) -> Starlette:
        async def brave(request: Request) -> Response:
            return await self._answer(request, "brave")

        async def search(request: Request) -> Response:
            provider = "tavily" if request.method == "POST" else "searxng"
            return await self._answer(request, provider)

        return Starlette(
            routes=[
                Route("/res/v1/web/search", brave, methods=["GET"]),
                Route("/search", search, methods=["GET", "POST"]),
            ]
        )

    async def _answer(self, request: Request, provider: str) -> Response:
        body = await request.body()
        payload = json.loads(body) if body else None
        self.calls.append(
            Call(
                provider,
                request.method,
                request.url.path,
                dict(request.query_params),
                dict(request.headers),
                payload,
            )
        )
        self.changed()
        if self._failures:
            failure = self._failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._failures.pop(0)
            headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
            content = failure.body or {
                "type": "ErrorResponse",
                "error": {
                    "detail": "Request rate limit exceeded for plan.",
                    "code": "RATE_LIMITED",
                },
            }
            return JSONResponse(content, failure.status, headers)
        return JSONResponse(self._shape(provider, request, payload))

    def _shape(self, provider: str, request: Request, payload: Any) -> Any:
        if provider == "brave":
            count = int(request.query_params.get("count", "20"))
            items = [
                {"title": r["title"], "url": r["url"], "description": _strong(r["snippet"])}
                for r in self.results[:count]
            ]
            return {"type": "search", "web": {"type": "search", "results": items}}
        if provider == "tavily":
            count = int((payload or {}).get("max_results", 5))
            items = [
                {"title": r["title"], "url": r["url"], "content": r["snippet"], "score": 0.9}
                for r in self.results[:count]
            ]
            return {"query": (payload or {}).get("query"), "results": items}
        items = [
            {"title": r["title"], "url": r["url"], "content": r["snippet"], "engine": "fake"}
            for r in self.results
        ]
        return {"query": request.query_params.get("q"), "results": items}


def _strong(text: str) -> str:
    # Brave marks the query's words: the tool must hand the model plain text.
    return text.replace("solar sail", "<strong>solar sail</strong>", 1)
