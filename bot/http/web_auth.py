"""Who may use the web chat: open on loopback, a token elsewhere, or explicitly public.

Anyone who reaches ``/`` and ``/ws`` runs the agent on the operator's LLM key and tools, so off
loopback the web chat needs ``web.token`` and is disabled without one. :class:`TokenAuth` is the
shared check (the dashboard will use it with its own, separate admin token): ``Authorization:
Bearer``, ``?token=`` (a WebSocket can't set headers) or the cookie the login form sets. The
cookie holds an HMAC of the token, never the token itself.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.datastructures import URL, Headers

from bot.config import Config

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


class WebAccess(enum.StrEnum):
    OPEN = "open"  # loopback, no token configured: today's first-run experience
    TOKEN = "token"  # a token is required
    PUBLIC = "public"  # web.public: anonymous on purpose
    DISABLED = "disabled"  # off loopback without a token


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def web_access(config: Config) -> WebAccess:
    if config.web.token:
        return WebAccess.TOKEN
    if config.web.public:
        return WebAccess.PUBLIC
    return WebAccess.OPEN if is_loopback(config.server.host) else WebAccess.DISABLED


@dataclass(frozen=True)
class TokenAuth:
    """A bearer token checked in constant time; ``cookie_name`` scopes its login cookie."""

    token: str
    cookie_name: str

    @property
    def cookie_value(self) -> str:
        return hmac.new(
            self.token.encode(), f"loopgate-session:{self.cookie_name}".encode(), hashlib.sha256
        ).hexdigest()

    def allows(self, headers: Headers, url: URL, cookies: dict[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.matches(given.strip()):
            return True
        if (query := url.query) and self.matches(_query_token(query)):
            return True
        cookie = cookies.get(self.cookie_name, "")
        return bool(cookie) and secrets.compare_digest(cookie, self.cookie_value)

    def matches(self, given: str) -> bool:
        return bool(given) and secrets.compare_digest(given.encode(), self.token.encode())


def _query_token(query: str) -> str:
    values = parse_qs(query).get("token")
    return values[0] if values else ""


def form_token(body: bytes) -> str:
    """The ``token`` field of the login form (``application/x-www-form-urlencoded``)."""
    values = parse_qs(body.decode("utf-8", errors="replace")).get("token")
    return values[0] if values else ""


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loopgate: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input,button{font-size:1rem;padding:.5rem}p.error{color:#b00}</style></head>
<body><h1>Loopgate</h1><p>This web chat needs the access token (<code>web.token</code>).</p>
{error}<form method="post" action="/login">
<input type="password" name="token" autocomplete="current-password" autofocus required>
<button type="submit">Sign in</button></form></body></html>
"""

DISABLED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loopgate</title></head>
<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto">
<h1>Web chat disabled</h1><p>This Loopgate listens on a public address and has no
<code>web.token</code>, so its web chat is off: anyone could otherwise run the agent on the
operator's LLM key. The operator can set <code>web.token</code> (for example
<code>web: {token: "${LOOPGATE_WEB_TOKEN}"}</code>) or, to allow anonymous use on purpose,
<code>web.public: true</code>.</p></body></html>
"""


def login_page(*, failed: bool = False) -> str:
    error = '<p class="error">That token is not right.</p>' if failed else ""
    return LOGIN_PAGE.replace("{error}", error)
