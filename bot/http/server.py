"""The HTTP server: health check, metrics (:mod:`bot.http.metrics`), the local web chat (page +
WebSocket), platform webhooks, and the operator dashboard under ``/admin`` (:mod:`bot.admin`,
only with ``admin.token`` set).

Every POST body is bounded (``server.max_body_bytes``, :mod:`bot.http.body_limit`); the web chat is
open on loopback only, and needs ``web.token`` elsewhere (:mod:`bot.http.web_auth`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from importlib import resources
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from agent_core import Event
from bot.app import Loopgate
from bot.http.body_limit import BodyLimit
from bot.http.health import health_report
from bot.http.metrics import metrics_route
from bot.http.web_auth import (
    DISABLED_PAGE,
    TokenAuth,
    WebAccess,
    form_token,
    login_page,
    web_access,
)
from bot.pipeline.session_keys import session_key
from bot.redaction import redact_tree
from channels import (
    ChatRef,
    ChatType,
    FileHost,
    InboundMessage,
    NotAccepted,
    Sender,
    WebhookReceiver,
)
from channels.local import Outbound

log = structlog.get_logger(__name__)

WEB_COOKIE = "loopgate_web"
WEB_COOKIE_MAX_AGE = 30 * 24 * 3600


def create_app(
    loopgate: Loopgate, *, manage_lifespan: bool = True, started: bool = False
) -> Starlette:
    """The ASGI app. With ``manage_lifespan`` the app starts and stops ``loopgate`` itself;
    with ``started`` the caller has started it already and the app only stops it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not manage_lifespan:
            yield
        elif started:
            try:
                yield
            finally:
                await loopgate.aclose()
        else:
            async with loopgate:
                yield

    async def healthz(request: Request) -> JSONResponse:
        body, status = await health_report(loopgate)
        return JSONResponse(body, status_code=status)

    page = resources.files("bot").joinpath("web/index.html").read_text(encoding="utf-8")

    config = loopgate.config
    access = web_access(config)
    auth = TokenAuth(config.web.token, WEB_COOKIE) if access is WebAccess.TOKEN else None
    _log_web_access(access, config.server.host)

    def web_allowed(conn: HTTPConnection) -> bool:
        if auth is not None:
            return auth.allows(conn.headers, conn.url, conn.cookies)
        return access is not WebAccess.DISABLED

    async def index(request: Request) -> HTMLResponse:
        if access is WebAccess.DISABLED:
            return HTMLResponse(DISABLED_PAGE, 403)
        if not web_allowed(request):
            return HTMLResponse(login_page(), 401)
        return HTMLResponse(page)

    async def login_form(request: Request) -> Response:
        if auth is None:
            return RedirectResponse("/", 303)
        return HTMLResponse(login_page())

    async def login(request: Request) -> Response:
        if auth is None:
            return JSONResponse({"error": "no login needed here"}, 404)
        if not auth.matches(form_token(await request.body())):
            client = request.client.host if request.client else ""
            log.warning("web.login_failed", client=client)
            return HTMLResponse(login_page(failed=True), 401)
        response = RedirectResponse("/", 303)
        response.set_cookie(
            WEB_COOKIE,
            auth.cookie_value,
            max_age=WEB_COOKIE_MAX_AGE,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def chat_socket(ws: WebSocket) -> None:
        if not web_allowed(ws):
            # Closed before the handshake completes: the browser sees a refused upgrade (403).
            log.info("web.socket_refused", access=str(access))
            await ws.close(code=1008)
            return
        await _serve_chat(loopgate, ws, max_bytes=config.server.max_ws_message_bytes)

    async def webhook(request: Request) -> Response:
        # Channels are built at start-up, after routes exist: look the receiver up per request.
        for channel in loopgate.gateway.channels.values():
            if isinstance(channel, WebhookReceiver) and channel.webhook_path == request.url.path:
                if not loopgate.channel_starter.is_up(channel.name):
                    # Not yet able to answer (identity unknown): the platform retries later.
                    return JSONResponse({"error": f"{channel.name} is starting"}, 503)
                return await channel.handle_webhook(request)
        return JSONResponse({"error": "no enabled channel receives webhooks here"}, 404)

    async def hosted_file(request: Request) -> Response:
        # A platform fetching a file the bot sent it by link (Zalo's sendPhoto).
        for channel in loopgate.gateway.channels.values():
            if (
                isinstance(channel, FileHost)
                and channel.files_path
                and request.url.path.startswith(channel.files_path)
            ):
                return await channel.serve_file(request)
        return Response(status_code=404)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            metrics_route(loopgate),  # GET /metrics, behind admin.token when it is set
            Route("/", index),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            WebSocketRoute("/ws", chat_socket),
            *_admin_routes(loopgate),  # /admin, only with admin.token set
            # POST /telegram/webhook, /slack/events, /zalo/webhook: whichever channel claims it.
            Route("/{path:path}", webhook, methods=["POST"]),
            # GET /zalo/files/…: a file a channel offers by link (FileHost).
            Route("/{channel}/files/{rest:path}", hosted_file, methods=["GET"]),
        ],
        middleware=[Middleware(BodyLimit, max_bytes=config.server.max_body_bytes)],
        lifespan=lifespan,
    )


def _admin_routes(loopgate: Loopgate) -> list[BaseRoute]:
    """The dashboard with ``admin.token`` set, else a plain 404 for ``/admin*`` (not the 405
    that the webhook route would answer a GET with), without importing :mod:`bot.admin`."""
    if not loopgate.config.admin.token:

        async def absent(request: Request) -> Response:
            return PlainTextResponse("Not Found", 404)

        methods = ["GET", "HEAD", "POST", "PUT", "DELETE"]
        return [Route("/admin{rest:path}", absent, methods=methods)]
    from bot.admin.app import admin_routes

    return admin_routes(loopgate)


def _log_web_access(access: WebAccess, host: str) -> None:
    if access is WebAccess.DISABLED:
        log.warning(
            "web.disabled",
            reason=f"server.host {host} is not a loopback address and web.token is not set",
            fix="set web.token (e.g. ${LOOPGATE_WEB_TOKEN}) to require it, "
            "or web.public: true to allow anonymous use",
        )
    elif access is WebAccess.PUBLIC:
        log.warning("web.public", host=host, note="anyone who reaches / can run the agent")


async def _serve_chat(loopgate: Loopgate, ws: WebSocket, *, max_bytes: int) -> None:
    """One browser tab: its messages go in through the web channel, events and replies come out.

    The browser keeps a random user id in localStorage, so a reload continues the conversation.
    """
    user = (ws.query_params.get("user") or "").strip()[:64] or uuid.uuid4().hex
    await ws.accept()
    chat = ChatRef(channel="web", chat_id=user, chat_type=ChatType.DIRECT)
    key = session_key(loopgate.gateway.agent_for("web"), chat)

    async def send(payload: dict[str, Any]) -> None:
        # The tab may close while a run is still streaming to it.
        with suppress(WebSocketDisconnect, RuntimeError):
            await ws.send_text(json.dumps(payload, ensure_ascii=False, default=str))

    async def on_event(event: Event) -> None:
        # A run.failed event carries the error text, which may quote a secret.
        await send({"type": "event", "event": redact_tree(event.as_dict())})

    async def on_outbound(record: Outbound) -> None:
        await send({"type": "outbound", "kind": record.kind, "text": record.text})

    unsubscribe_events = loopgate.events.subscribe(on_event, session_key=key)
    unsubscribe_outbound = loopgate.web.listen(user, on_outbound)
    await send({"type": "hello", "user": user, "session_key": key})
    try:
        while True:
            raw = await ws.receive_text()
            if len(raw) > max_bytes // 4 and len(raw.encode()) > max_bytes:
                log.warning("web.message_too_large", user=user, limit=max_bytes)
                await send({"type": "error", "error": f"message larger than {max_bytes} bytes"})
                await ws.close(code=1009)
                return
            text_in = _parse_client_message(raw)
            if text_in is None:
                await send({"type": "error", "error": 'expected {"type": "message", "text": ...}'})
                continue
            try:
                await loopgate.web.receive(
                    InboundMessage(
                        chat=chat,
                        message_id=uuid.uuid4().hex,
                        sender=Sender(id=user, name="web user"),
                        text=text_in,
                    )
                )
            except NotAccepted as exc:
                await send({"type": "error", "error": f"not accepted ({exc}): send it again"})
    except WebSocketDisconnect:
        pass
    finally:
        unsubscribe_events()
        unsubscribe_outbound()


def _parse_client_message(raw: str) -> str | None:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("type") != "message":
        return None
    value = data.get("text")
    return value if isinstance(value, str) else None
