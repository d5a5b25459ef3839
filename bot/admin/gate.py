"""The door of every dashboard request: authentication, CSRF, login and logout.

Anonymous or wrong-token requests get 401 and nothing else: the login form for pages, a JSON
error under ``/admin/api/``. A client that failed too often in a row gets 429 until its window
passes, whatever it sends (:class:`bot.admin.auth.LoginLimiter`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.admin.auth import (
    ADMIN_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    Verdict,
    client_address,
)
from bot.admin.context import Admin, Who, form_fields, json_response, prefix

log = structlog.get_logger(__name__)

Handler = Callable[[Request, Who], Awaitable[Response]]


def is_api(request: Request) -> bool:
    return request.url.path.startswith(f"{prefix(request)}/api/")


def guard(admin: Admin, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` behind the token check (and the CSRF check for a session's POST/PUT/...)."""

    async def endpoint(request: Request) -> Response:
        client = client_address(request)
        verdict, session = admin.sessions.check(request)
        if verdict is Verdict.WRONG_TOKEN:
            admin.limiter.failed(client)
        # A signed-in session is not locked out by someone else failing from the same address
        # (an office NAT); a Bearer token is, so a guessed token can't be told right from wrong.
        wait = 0.0 if verdict is Verdict.SESSION else admin.limiter.retry_after(client)
        if wait > 0:
            log.warning("admin.locked_out", client=client, path=request.url.path)
            return too_many(admin, request, wait)
        if verdict in (Verdict.ANONYMOUS, Verdict.WRONG_TOKEN):
            log.info("admin.refused", client=client, path=request.url.path, reason=str(verdict))
            return unauthorized(admin, request)
        who = Who(str(verdict), session, admin.sessions.csrf_token(session) if session else "")
        if session is not None and request.method not in SAFE_METHODS:
            given = request.headers.get(CSRF_HEADER) or (await form_fields(request)).get(
                CSRF_FIELD, ""
            )
            if not admin.sessions.csrf_ok(session, given):
                log.warning("admin.csrf_refused", client=client, path=request.url.path)
                return forbidden(admin, request, who)
        return await handler(request, who)

    return endpoint


def unauthorized(admin: Admin, request: Request, *, failed: bool = False) -> Response:
    if is_api(request):
        return json_response(
            {"error": "unauthorized: send Authorization: Bearer <admin.token>"},
            401,
            **{"WWW-Authenticate": 'Bearer realm="loopgate-admin"'},
        )
    wanted = request.url.path if request.method == "GET" else ""
    return admin.render(
        request, "login.html", None, status=401, failed=failed, next=safe_next(request, wanted)
    )


def too_many(admin: Admin, request: Request, wait: float) -> Response:
    retry = str(max(1, math.ceil(wait)))
    if is_api(request):
        return json_response({"error": "too many failed attempts"}, 429, **{"Retry-After": retry})
    response = admin.render(request, "login.html", None, status=429, locked=int(retry), next="")
    response.headers["Retry-After"] = retry
    return response


def forbidden(admin: Admin, request: Request, who: Who) -> Response:
    error = "missing or wrong CSRF token (X-CSRF-Token header or csrf_token field)"
    if is_api(request):
        return json_response({"error": error}, 403)
    return admin.render(request, "error.html", who, status=403, message=error)


def safe_next(request: Request, wanted: str) -> str:
    """A page under the dashboard to go to after the login, never another site."""
    base = prefix(request)
    parts = urlsplit(wanted)
    good = (
        not parts.scheme
        and not parts.netloc
        and parts.path.startswith(f"{base}/")
        and "//" not in parts.path
        and not parts.path.startswith(f"{base}/api/")
        and parts.path != f"{base}/login"
    )
    return parts.path if good else f"{base}/"


async def login_form(admin: Admin, request: Request) -> Response:
    verdict, _ = admin.sessions.check(request)
    if verdict is Verdict.SESSION:
        return RedirectResponse(f"{prefix(request)}/", 303)
    next_page = safe_next(request, request.query_params.get("next", ""))
    return admin.render(request, "login.html", None, next=next_page)


async def login(admin: Admin, request: Request) -> Response:
    client = client_address(request)
    wait = admin.limiter.retry_after(client)
    if wait > 0:
        log.warning("admin.locked_out", client=client, path=request.url.path)
        return too_many(admin, request, wait)
    fields = await form_fields(request)
    next_page = safe_next(request, fields.get("next", ""))
    if not admin.sessions.auth.matches(fields.get("token", "")):
        admin.limiter.failed(client)
        log.warning("admin.login_failed", client=client)
        return admin.render(request, "login.html", None, status=401, failed=True, next=next_page)
    _session, cookie = admin.sessions.new()
    log.info("admin.login", client=client)
    response = RedirectResponse(next_page, 303)
    response.set_cookie(
        ADMIN_COOKIE,
        cookie,
        max_age=int(admin.sessions.max_age),
        path=f"{prefix(request)}/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(admin: Admin, request: Request, who: Who) -> Response:
    if who.session is not None:
        admin.sessions.end(who.session)
    response = RedirectResponse(f"{prefix(request)}/login", 303)
    response.delete_cookie(ADMIN_COOKIE, path=f"{prefix(request)}/")
    log.info("admin.logout", client=client_address(request))
    return response
