"""A real-HTTP fake of the Zalo Bot API (``/bot{token}/{method}``, JSON POST), for tests.

Listens on 127.0.0.1 (a free port) inside the test's event loop, like ``llm_server.FakeLLM``::

    async with FakeZalo(token="123:abc") as zalo:
        zalo.push(text_event("hi", chat_id="u1"))       # the next getUpdates returns it
        zalo.fail("sendMessage", 503, times=2)           # then answers normally
        await zalo.wait_for(lambda: zalo.messages)
        assert zalo.messages[0].text == "echo: hi"

Wire shapes (what we verified in Zalo's docs, see README "Zalo"): every answer is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N, "description": "..."}``; an
event is ``{"event_name": "message.text.received", "message": {"from": {"id", "display_name",
"is_bot"}, "chat": {"id", "chat_type": "PRIVATE"|"GROUP"}, "text", "message_id", "date" (ms)}}``.
``getUpdates`` answers ONE event object by default (``updates_shape = "list"`` answers a list), and
an idle long poll ends with HTTP 408 ``{"ok": false, "error_code": 408}``, as the real one does.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import FakeServer

__all__ = ["Failure", "FakeZalo", "Recorded", "SentPhoto", "event", "image_event", "text_event"]

_ids = itertools.count(1)


DEFAULT_TOKEN = "12345:fake-token"


def event(
    event_name: str,
    *,
    chat_id: str = "user-1",
    sender_id: str | None = None,
    name: str = "Lan",
    chat_type: Literal["PRIVATE", "GROUP"] = "PRIVATE",
    message_id: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One inbound event, as Zalo sends it (webhook ``result`` / getUpdates ``result``)."""
    message: dict[str, Any] = {
        "from": {"id": sender_id or chat_id, "display_name": name, "is_bot": False},
        "chat": {"id": chat_id, "chat_type": chat_type},
        "message_id": message_id or f"msg-{next(_ids)}",
        "date": 1730000000000 + next(_ids),
        **fields,
    }
    return {"event_name": event_name, "message": message}


def text_event(text: str, **kw: Any) -> dict[str, Any]:
    return event("message.text.received", text=text, **kw)


def image_event(photo: str, caption: str | None = None, **kw: Any) -> dict[str, Any]:
    extra = {"caption": caption} if caption is not None else {}
    return event("message.image.received", photo=photo, **extra, **kw)


@dataclass(frozen=True)
class SentPhoto:
    """A ``sendPhoto`` whose picture the fake fetched from its (loopback) URL."""

    chat_id: str
    url: str
    data: bytes
    body: dict[str, Any]


_CALLER_PORT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "zalo_caller_port", default=None
)


@dataclass(frozen=True)
class Recorded:
    method: str
    token: str
    json: dict[str, Any]
    at: float  # time.monotonic() on arrival
    status: int = 200
    client_port: int | None = None
    """The caller's TCP port: which process made the call (``benchmarks/chaos.py``)."""


@dataclass
class Failure:
    status: int
    error_code: int | None = None
    description: str = "error"
    retry_after: float | None = None
    delivered: bool = False  # sendMessage: record the message anyway (it "went out") and fail


class FakeZalo(FakeServer):
    name = "FakeZalo"

    def __init__(self, token: str = DEFAULT_TOKEN, *, idle_wait: float = 0.2) -> None:
        super().__init__()
        self.token = token
        self.idle_wait = idle_wait  # cap on how long an idle getUpdates waits before 408
        self.updates_shape: Literal["object", "list"] = "object"
        self.invalid_token = False  # every call answers 401, whatever the token
        self.bot = {
            "id": "bot-1",
            "account_name": "bot.loopgate",
            "account_type": "BASIC",
            "can_join_groups": True,
        }
        self.webhook: dict[str, Any] = {"url": "", "secret_token": "", "updated_at": 0}
        self.requests: list[Recorded] = []
        self.messages: list[Recorded] = []  # sendMessage calls that were delivered
        self.photos: list[SentPhoto] = []  # sendPhoto calls whose loopback URL was fetched
        self._updates: deque[dict[str, Any]] = deque()
        self._failures: dict[str, deque[Failure]] = defaultdict(deque)
        self.hosted_photos: dict[str, bytes] = {}
        """Name → bytes: what the photo URLs of :meth:`add_photo` serve (Zalo's CDN)."""
        self.photo_downloads: list[tuple[str, dict[str, str]]] = []
        """(name, request headers) of every photo request, in order."""

    # -- scripting -------------------------------------------------------------------------

    def push(self, *events: dict[str, Any]) -> None:
        """Queue events for the next getUpdates calls."""
        self._updates.extend(events)
        self.changed()

    def fail(self, method: str, status: int, *, times: int = 1, **kw: Any) -> None:
        """The next ``times`` calls of ``method`` fail with ``status``."""
        self._failures[method].extend(Failure(status, **kw) for _ in range(times))

    @property
    def pending_updates(self) -> int:
        return len(self._updates)

    def calls(self, method: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method]

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [
            m.json["text"]
            for m in self.messages
            if chat_id is None or m.json.get("chat_id") == chat_id
        ]

    def timeout_detail(self) -> str:
        return f"last requests: {[r.method for r in self.requests[-15:]]}"

    async def post_webhook(
        self, url: str, payload: Any, *, secret: str | None, transport: Any = None
    ) -> httpx.Response:
        """Deliver an event to a bot's webhook the way Zalo does (secret in the header)."""
        headers = {"X-Bot-Api-Secret-Token": secret} if secret is not None else {}
        async with httpx.AsyncClient(transport=transport, timeout=10) as client:
            return await client.post(url, json=payload, headers=headers)

    # -- server ----------------------------------------------------------------------------

    def add_photo(self, data: bytes, name: str | None = None) -> str:
        """Serve ``data`` as a photo; returns its URL, for an image event's ``photo``."""
        name = name or f"p{len(self.hosted_photos) + 1}.jpg"
        self.hosted_photos[name] = data
        return f"{self.base_url}/photos/{name}"

    async def _photo(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.photo_downloads.append((name, {k.lower(): v for k, v in request.headers.items()}))
        self.changed()
        if name not in self.hosted_photos:
            return Response("not found", status_code=404)
        return Response(self.hosted_photos[name], media_type="image/jpeg")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._call, methods=["POST"]),
                Route("/photos/{name}", self._photo, methods=["GET"]),
            ]
        )

    # -- handlers --------------------------------------------------------------------------

    async def _call(self, request: Request) -> Response:
        token = request.path_params["token"]
        method = request.path_params["method"]
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        port = request.client.port if request.client else None
        _CALLER_PORT.set(port)  # for the handlers' records (each request is a task of its own)
        response = await self._answer(token, method, body if isinstance(body, dict) else {})
        self.requests.append(
            Recorded(method, token, body, time.monotonic(), response.status_code, port)
        )
        self.changed()
        return response

    async def _answer(self, token: str, method: str, body: dict[str, Any]) -> Response:
        if self.invalid_token or token != self.token:
            return _error(401, 401, "Unauthorized")
        failures = self._failures.get(method)
        if failures:
            failure = failures.popleft()
            if failure.delivered and method == "sendMessage":
                self.messages.append(
                    Recorded(method, token, body, time.monotonic(), client_port=_CALLER_PORT.get())
                )
            headers = {"Retry-After": f"{failure.retry_after:g}"} if failure.retry_after else {}
            code = failure.error_code if failure.error_code is not None else failure.status
            return _error(failure.status, code, failure.description, headers)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, 404, f"method {method} not found")
        try:
            result = await handler(body)
        except _Idle:
            return _error(408, 408, "Request timeout")
        except _BadRequest as exc:
            return _error(400, 400, str(exc))
        return JSONResponse({"ok": True, "result": result} if result is not None else {"ok": True})

    async def _m_getMe(self, body: dict[str, Any]) -> Any:
        return self.bot

    async def _m_getUpdates(self, body: dict[str, Any]) -> Any:
        if self.webhook["url"]:
            return None  # like the real API: nothing while a webhook is set
        wait = min(float(body.get("timeout") or 30), self.idle_wait)
        deadline = time.monotonic() + wait
        while not self._updates and not self._closing.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self.next_change(remaining)
        if not self._updates:
            raise _Idle
        if self.updates_shape == "list":
            batch = list(self._updates)
            self._updates.clear()
            return batch
        return self._updates.popleft()

    async def _m_setWebhook(self, body: dict[str, Any]) -> Any:
        self.webhook = {
            "url": body.get("url", ""),
            "secret_token": body.get("secret_token", ""),
            "updated_at": int(time.time() * 1000),
        }
        return {"url": self.webhook["url"], "updated_at": self.webhook["updated_at"]}

    async def _m_deleteWebhook(self, body: dict[str, Any]) -> Any:
        self.webhook = {"url": "", "secret_token": "", "updated_at": int(time.time() * 1000)}
        return {"url": "", "updated_at": self.webhook["updated_at"]}

    async def _m_getWebhookInfo(self, body: dict[str, Any]) -> Any:
        return {"url": self.webhook["url"], "updated_at": self.webhook["updated_at"]}

    async def _m_sendMessage(self, body: dict[str, Any]) -> Any:
        text = body.get("text")
        if not body.get("chat_id") or not isinstance(text, str) or not 1 <= len(text) <= 2000:
            raise _BadRequest("text must be 1..2000 characters and chat_id is required")
        self.messages.append(
            Recorded("sendMessage", self.token, body, time.monotonic(),
                     client_port=_CALLER_PORT.get())
        )  # fmt: skip
        return {"message_id": f"out-{next(_ids)}", "date": int(time.time() * 1000)}

    async def _m_sendPhoto(self, body: dict[str, Any]) -> Any:
        if not body.get("chat_id") or not body.get("photo"):
            raise _BadRequest("chat_id and photo are required")
        url = str(body["photo"])
        if url.startswith("http://127.0.0.1:"):
            # Like Zalo, fetch the picture from its URL (only a loopback one: tests have no
            # internet); what it could not fetch is a bad request.
            async with httpx.AsyncClient() as client:
                response = await client.get(url)
            if response.status_code != 200:
                raise _BadRequest(f"could not fetch the photo (HTTP {response.status_code})")
            self.photos.append(SentPhoto(str(body["chat_id"]), url, response.content, body))
        return {"message_id": f"out-{next(_ids)}", "date": int(time.time() * 1000)}

    async def _m_sendChatAction(self, body: dict[str, Any]) -> Any:
        if body.get("action") not in ("typing", "upload_photo"):
            raise _BadRequest("unknown action")
        return None  # the documented answer is just {"ok": true}


class _Idle(Exception):
    pass


class _BadRequest(Exception):
    pass


def _error(
    status: int, code: int, description: str, headers: dict[str, str] | None = None
) -> Response:
    return JSONResponse(
        {"ok": False, "error_code": code, "description": description},
        status_code=status,
        headers=headers,
    )
