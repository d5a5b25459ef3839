"""The ``/admin`` mount of the HTTP server (:func:`admin_routes`), imported only when
``admin.token`` is set; without it ``/admin`` does not exist (:mod:`bot.http.server` answers 404
for everything under it).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.app import Loopgate

# Scripts only from our own static file, no framing, no foreign form targets, nothing cached.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"cache-control"]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def admin_routes(loopgate: Loopgate) -> list[BaseRoute]:
    """``[Mount("/admin", ...)]``: the dashboard, for a service with ``admin.token`` set (without
    it, :mod:`bot.http.server` answers ``/admin*`` itself and never imports this module)."""
    config = loopgate.config.admin
    if not config.token:
        raise ValueError("the dashboard needs admin.token")
    # Imported only now: the pages need Jinja2 (~5 MiB), which a service without the dashboard
    # should not carry.
    from bot.admin.api import api_routes
    from bot.admin.auth import AdminSessions, LoginLimiter
    from bot.admin.context import Admin
    from bot.admin.gate import login, login_form
    from bot.admin.pages import page_routes
    from bot.admin.runs import RunTracker

    admin = Admin(
        loopgate=loopgate,
        sessions=AdminSessions(config.token, max_age=config.session_max_age),
        limiter=LoginLimiter(),
        tracker=RunTracker(loopgate),
    )

    async def show_login(request: Request) -> Response:
        return await login_form(admin, request)

    async def do_login(request: Request) -> Response:
        return await login(admin, request)

    app = Starlette(
        routes=[
            Route("/login", show_login, methods=["GET"]),
            Route("/login", do_login, methods=["POST"]),
            *api_routes(admin),
            *page_routes(admin),
        ],
        middleware=[Middleware(SecurityHeaders)],
    )

    async def to_dashboard(request: Request) -> Response:
        # "/admin" itself is outside the mount: without this, the webhooks' POST-only catch-all
        # would answer it 405.
        return RedirectResponse(request.url.replace(path=request.url.path + "/"), status_code=307)

    return [Route("/admin", to_dashboard, methods=["GET", "HEAD"]), Mount("/admin", app=app)]
