"""The dashboard's session cookies, CSRF tokens, request verdicts and login limiter, as units
(tests/bot/admin/test_gate.py covers them over HTTP; here too plus expiry/forgery and the limiter's
window)."""

from __future__ import annotations

from starlette.requests import Request

from bot.admin.auth import (
    ADMIN_COOKIE,
    AdminSessions,
    LoginLimiter,
    Verdict,
    client_address,
)
from tests.admin_support import BEARER, TOKEN


def request(
    headers: dict[str, str] | None = None, client: tuple[str, int] | None = ("10.0.0.9", 5555)
) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "method": "GET", "path": "/admin", "headers": raw, "client": client}
    return Request(scope)


def cookie_header(cookie: str) -> dict[str, str]:
    return {"Cookie": f"{ADMIN_COOKIE}={cookie}"}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestSessions:
    def test_cookie_shape_and_expiry(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60, clock=Clock(1000.0))
        session, cookie = sessions.new()
        sid, expires, signature = cookie.split(".")
        assert sid == session.id and len(sid) == 32
        assert int(expires) == 1060 == session.expires_at
        assert TOKEN not in cookie and len(signature) == 64

    def test_every_session_is_new(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        assert sessions.new()[0].id != sessions.new()[0].id

    def test_malformed_cookies_are_no_session(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        _, cookie = sessions.new()
        sid, expires, signature = cookie.split(".")
        for bad in ("", "x", f"{sid}.{expires}", f"{sid}.-5.{signature}", f"{sid}.x.{signature}",
                    f"{cookie}.extra", f"{sid}.{expires}.{signature[:-1]}"):  # fmt: skip
            assert sessions.read(bad) is None, bad

    def test_logout_ends_only_that_session(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        one, one_cookie = sessions.new()
        _, two_cookie = sessions.new()
        sessions.end(one)
        assert sessions.read(one_cookie) is None
        assert sessions.read(two_cookie) is not None

    def test_logged_out_sessions_are_forgotten_once_expired(self) -> None:
        clock = Clock()
        sessions = AdminSessions(TOKEN, max_age=60, clock=clock)
        old, _ = sessions.new()
        sessions.end(old)
        clock.now += 120
        fresh, fresh_cookie = sessions.new()
        sessions.end(fresh)  # prunes the expired logout of ``old``
        assert sessions.read(fresh_cookie) is None
        assert old.id not in sessions._ended and fresh.id in sessions._ended

    def test_csrf_token_is_per_session_and_per_admin_token(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        one, _ = sessions.new()
        two, _ = sessions.new()
        token = sessions.csrf_token(one)
        assert sessions.csrf_ok(one, token)
        assert not sessions.csrf_ok(two, token)
        assert not sessions.csrf_ok(one, "")
        assert not sessions.csrf_ok(one, token[:-1])
        other = AdminSessions("another-token-0123456789", max_age=60)
        assert not other.csrf_ok(one, token)


class TestCheck:
    def test_bearer(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        assert sessions.check(request(BEARER)) == (Verdict.BEARER, None)
        assert sessions.check(request({"Authorization": f"bearer {TOKEN}"}))[0] is Verdict.BEARER

    def test_wrong_bearer_wins_over_a_good_cookie(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        _, cookie = sessions.new()
        headers = {"Authorization": "Bearer nope", **cookie_header(cookie)}
        assert sessions.check(request(headers)) == (Verdict.WRONG_TOKEN, None)
        assert sessions.check(request({"Authorization": "Bearer "}))[0] is Verdict.WRONG_TOKEN

    def test_session_cookie(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        session, cookie = sessions.new()
        verdict, found = sessions.check(request(cookie_header(cookie)))
        assert verdict is Verdict.SESSION and found is not None and found.id == session.id

    def test_other_schemes_fall_back_to_the_cookie(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        _, cookie = sessions.new()
        basic = {"Authorization": f"Basic {TOKEN}"}
        assert sessions.check(request(basic)) == (Verdict.ANONYMOUS, None)
        assert sessions.check(request({**basic, **cookie_header(cookie)}))[0] is Verdict.SESSION

    def test_anonymous(self) -> None:
        sessions = AdminSessions(TOKEN, max_age=60)
        assert sessions.check(request()) == (Verdict.ANONYMOUS, None)
        assert sessions.check(request(cookie_header("forged.123.abc"))) == (
            Verdict.ANONYMOUS,
            None,
        )

    def test_changing_the_admin_token_ends_sessions(self) -> None:
        _, cookie = AdminSessions(TOKEN, max_age=60).new()
        renewed = AdminSessions("another-token-0123456789", max_age=60)
        assert renewed.check(request(cookie_header(cookie)))[0] is Verdict.ANONYMOUS


class TestLimiter:
    def test_refused_after_the_attempts_until_the_oldest_ages_out(self) -> None:
        clock = Clock(0.0)
        limiter = LoginLimiter(attempts=3, window=10, clock=clock)
        for at in (0.0, 4.0):
            clock.now = at
            limiter.failed("a")
        assert limiter.retry_after("a") == 0
        clock.now = 6.0
        limiter.failed("a")
        assert limiter.retry_after("a") == 4.0  # the failure at 0 ages out at 10
        clock.now = 10.0
        assert limiter.retry_after("a") == 0  # two failures left in the window
        limiter.failed("a")
        assert limiter.retry_after("a") == 4.0  # now the one at 4 is the oldest

    def test_clients_are_counted_apart(self) -> None:
        limiter = LoginLimiter(attempts=1, window=10, clock=Clock(0.0))
        limiter.failed("a")
        assert limiter.retry_after("a") == 10 and limiter.retry_after("b") == 0

    def test_memory_is_bounded_dropping_the_oldest_half(self) -> None:
        clock = Clock(0.0)
        limiter = LoginLimiter(attempts=1, window=100, max_clients=4, clock=clock)
        for n, client in enumerate("abcd"):
            clock.now = float(n)
            limiter.failed(client)
        clock.now = 4.0
        limiter.failed("e")
        assert [c for c in "abcde" if limiter.retry_after(c) > 0] == ["c", "d", "e"]

    def test_idle_clients_are_dropped_first(self) -> None:
        clock = Clock(0.0)
        limiter = LoginLimiter(attempts=1, window=10, max_clients=4, clock=clock)
        for at, client in ((0.0, "idle"), (5.0, "b"), (6.0, "c"), (7.0, "d")):
            clock.now = at
            limiter.failed(client)
        clock.now = 12.0  # "idle" has aged out, the others have not
        limiter.failed("e")
        # Dropping "idle" made room: no active client was dropped to halve the table.
        assert all(limiter.retry_after(c) > 0 for c in "bcde")


def test_client_address() -> None:
    assert client_address(request()) == "10.0.0.9"
    assert client_address(request(client=None)) == "unknown"


class TestUnits:
    def test_session_cookie_expires_and_resists_forgery(self) -> None:
        now = [1000.0]
        sessions = AdminSessions(TOKEN, max_age=60, clock=lambda: now[0])
        session, cookie = sessions.new()
        assert sessions.read(cookie) == session
        sid, expires, signature = cookie.split(".")
        assert sessions.read(f"{sid}.{int(expires) + 999}.{signature}") is None
        assert AdminSessions("another-token-0123456789", max_age=60).read(cookie) is None
        now[0] += 61
        assert sessions.read(cookie) is None

    def test_limiter_forgets_old_failures(self) -> None:
        now = [0.0]
        limiter = LoginLimiter(attempts=2, window=10, clock=lambda: now[0])
        limiter.failed("a")
        limiter.failed("a")
        assert limiter.retry_after("a") == 10 and limiter.retry_after("b") == 0
        now[0] = 10.5
        assert limiter.retry_after("a") == 0
