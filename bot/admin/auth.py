"""Who may use the dashboard: the ``admin.token`` as a Bearer header, or a login session.

The login form (``/admin/login``) trades the token for a session cookie. The cookie never holds
the token: it is ``<session id>.<expiry>.<HMAC>`` under a key derived from the token, so changing
``admin.token`` ends every session. State-changing requests made with the cookie also need the
session's CSRF token (a hidden form field or the ``X-CSRF-Token`` header), an HMAC of the session
id; Bearer requests need none (a browser never adds that header by itself). Failed logins and
wrong Bearer tokens count against the client's address (:class:`LoginLimiter`).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from bot.http.web_auth import TokenAuth

ADMIN_COOKIE = "loopgate_admin"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Verdict(enum.StrEnum):
    BEARER = "bearer"
    SESSION = "session"
    ANONYMOUS = "anonymous"  # nothing given, or an expired/forged cookie
    WRONG_TOKEN = "wrong_token"  # a Bearer token that is not ours: counts as a failed login


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    expires_at: float


class AdminSessions:
    """Signs and checks session cookies; sessions themselves are not stored (only logouts)."""

    def __init__(
        self, token: str, *, max_age: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.auth = TokenAuth(token, ADMIN_COOKIE)
        self.max_age = max_age
        self._clock = clock
        self._key = hmac.new(token.encode(), b"loopgate-admin-session", hashlib.sha256).digest()
        self._ended: dict[str, float] = {}  # logged-out session id -> its expiry

    def _sign(self, message: str) -> str:
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def new(self) -> tuple[Session, str]:
        """A fresh session and its cookie value."""
        session = Session(secrets.token_hex(16), self._clock() + self.max_age)
        body = f"{session.id}.{int(session.expires_at)}"
        return session, f"{body}.{self._sign(body)}"

    def read(self, cookie: str) -> Session | None:
        """The session a cookie proves, or None (forged, expired, logged out, malformed)."""
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        sid, expires, signature = parts
        if not secrets.compare_digest(signature, self._sign(f"{sid}.{expires}")):
            return None
        now = self._clock()
        if int(expires) <= now or sid in self._ended:
            return None
        return Session(sid, float(expires))

    def end(self, session: Session) -> None:
        """Log out: the cookie stops working even if it was copied before."""
        now = self._clock()
        self._ended = {sid: exp for sid, exp in self._ended.items() if exp > now}
        self._ended[session.id] = session.expires_at

    def csrf_token(self, session: Session) -> str:
        return self._sign(f"csrf:{session.id}")

    def csrf_ok(self, session: Session, given: str) -> bool:
        return bool(given) and secrets.compare_digest(given, self.csrf_token(session))

    def check(self, request: Request) -> tuple[Verdict, Session | None]:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            ok = self.auth.matches(given.strip())
            return (Verdict.BEARER if ok else Verdict.WRONG_TOKEN), None
        session = self.read(request.cookies.get(ADMIN_COOKIE, ""))
        return (Verdict.SESSION, session) if session else (Verdict.ANONYMOUS, None)


class LoginLimiter:
    """At most ``attempts`` failed logins per client address in ``window`` seconds; past that
    the address is refused (even with the right token) until its oldest failure ages out."""

    def __init__(
        self,
        attempts: int = 5,
        window: float = 300.0,
        *,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempts = attempts
        self.window = window
        self.max_clients = max_clients
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        failures = self._recent(client)
        if len(failures) < self.attempts:
            return 0.0
        return max(0.0, failures[0] + self.window - self._clock())

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= self.max_clients:
            self._forget_idle()
        self._failures.setdefault(client, deque(maxlen=self.attempts)).append(self._clock())

    def _recent(self, client: str) -> deque[float]:
        failures = self._failures.get(client)
        if failures is None:
            return deque()
        horizon = self._clock() - self.window
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[client]
        return failures

    def _forget_idle(self) -> None:
        # Bounded memory under a spray of addresses: drop the idle ones, else the oldest half.
        for client in list(self._failures):
            self._recent(client)
        if len(self._failures) >= self.max_clients:
            by_age = sorted(self._failures, key=lambda c: self._failures[c][-1])
            for client in by_age[: len(by_age) // 2]:
                del self._failures[client]


def client_address(request: Request) -> str:
    # Behind a proxy this is the proxy unless uvicorn trusts it (``--forwarded-allow-ips``).
    return request.client.host if request.client else "unknown"
