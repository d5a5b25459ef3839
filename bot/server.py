"""The HTTP server: health check, the local web chat (page + WebSocket), platform webhooks."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from importlib import resources
from typing import Any

import structlog
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from agent_core import Event
from bot.app import Loopgate
from bot.session_keys import session_key
from channels import ChatRef, ChatType, InboundMessage, NotAccepted, Sender, WebhookReceiver
from channels.local import Outbound

log = structlog.get_logger(__name__)


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
        inbox: dict[str, int] = {}
        try:
            if loopgate.inbox is not None:
                counts = await loopgate.inbox.counts()
                inbox = {"depth": sum(counts.values()), **counts}
            else:
                async with loopgate.db.engine.connect() as conn:
                    await conn.execute(text("SELECT 1"))
        except Exception as exc:
            log.warning("healthz.database_failed", error=str(exc))
            return JSONResponse({"status": "error", "database": "unreachable"}, status_code=503)
        channels = {name: state.value for name, state in loopgate.channel_starter.states.items()}
        # A platform outage degrades the service but is no reason for the PaaS to restart us:
        # still 200, and the channel keeps retrying by itself. Draining is 503, so a load
        # balancer stops sending here.
        degraded = any(state != "up" for state in channels.values())
        status = "draining" if loopgate.draining else "degraded" if degraded else "ok"
        body: dict[str, Any] = {
            "status": status,
            "database": "ok",
            "active_runs": loopgate.registry.active_runs,
            "channels": channels,
        }
        if loopgate.inbox is not None:
            body["inbox"] = inbox
        return JSONResponse(body, status_code=503 if loopgate.draining else 200)

    page = resources.files("bot").joinpath("web/index.html").read_text(encoding="utf-8")

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def chat_socket(ws: WebSocket) -> None:
        await _serve_chat(loopgate, ws)

    async def webhook(request: Request) -> Response:
        # Channels are built at start-up, after routes exist: look the receiver up per request.
        for channel in loopgate.gateway.channels.values():
            if isinstance(channel, WebhookReceiver) and channel.webhook_path == request.url.path:
                if loopgate.draining:
                    # Not acknowledged: the platform delivers it again, to the next process.
                    return JSONResponse({"error": "shutting down, retry later"}, 503)
                if not loopgate.channel_starter.is_up(channel.name):
                    # Not yet able to answer (identity unknown): the platform retries later.
                    return JSONResponse({"error": f"{channel.name} is starting"}, 503)
                return await channel.handle_webhook(request)
        return JSONResponse({"error": "no enabled channel receives webhooks here"}, 404)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/", index),
            WebSocketRoute("/ws", chat_socket),
            # POST /telegram/webhook, /slack/events, /zalo/webhook: whichever channel claims it.
            Route("/{path:path}", webhook, methods=["POST"]),
        ],
        lifespan=lifespan,
    )


async def _serve_chat(loopgate: Loopgate, ws: WebSocket) -> None:
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
        await send({"type": "event", "event": event.as_dict()})

    async def on_outbound(record: Outbound) -> None:
        await send({"type": "outbound", "kind": record.kind, "text": record.text})

    unsubscribe_events = loopgate.events.subscribe(on_event, session_key=key)
    unsubscribe_outbound = loopgate.web.listen(user, on_outbound)
    await send({"type": "hello", "user": user, "session_key": key})
    try:
        while True:
            raw = await ws.receive_text()
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
