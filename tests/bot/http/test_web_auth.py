"""Who may use the web chat (:func:`web_access`) and the shared token check (:class:`TokenAuth`):
Bearer header, ``?token=``, or the login cookie holding an HMAC of the token, never the token."""

from __future__ import annotations

import pytest
from starlette.datastructures import URL, Headers

from bot.config import parse_config
from bot.http.web_auth import (
    TokenAuth,
    WebAccess,
    form_token,
    login_page,
    web_access,
)

TOKEN = "web-token-5f2c9a71"
AUTH = TokenAuth(TOKEN, "loopgate_web")
PAGE = URL("http://chat.example/")


def allows(
    headers: dict[str, str] | None = None,
    url: URL = PAGE,
    cookies: dict[str, str] | None = None,
    auth: TokenAuth = AUTH,
) -> bool:
    return auth.allows(Headers(headers or {}), url, cookies or {})


class TestWebAccess:
    @pytest.mark.parametrize(
        ("host", "web", "access"),
        [
            ("127.0.0.1", {}, WebAccess.OPEN),
            ("localhost", {}, WebAccess.OPEN),
            ("::1", {}, WebAccess.OPEN),
            ("0.0.0.0", {}, WebAccess.DISABLED),
            ("10.1.2.3", {}, WebAccess.DISABLED),
            ("0.0.0.0", {"public": True}, WebAccess.PUBLIC),
            ("127.0.0.1", {"public": True}, WebAccess.PUBLIC),
            ("0.0.0.0", {"token": TOKEN}, WebAccess.TOKEN),
            ("127.0.0.1", {"token": TOKEN}, WebAccess.TOKEN),
            ("0.0.0.0", {"token": TOKEN, "public": True}, WebAccess.TOKEN),
        ],
    )
    def test_access(self, host: str, web: dict[str, object], access: WebAccess) -> None:
        config = parse_config({"server": {"host": host}, "web": web}, {})
        assert web_access(config) is access


class TestTokenAuth:
    def test_nothing_given_is_refused(self) -> None:
        assert not allows()

    @pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
    def test_bearer_header_any_case(self, scheme: str) -> None:
        assert allows({"Authorization": f"{scheme} {TOKEN}"})
        assert allows({"Authorization": f"{scheme}   {TOKEN}  "})

    @pytest.mark.parametrize(
        "value",
        [f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer", "Bearer ", f"Bearer {TOKEN[:-1]}"],
    )
    def test_wrong_or_malformed_header(self, value: str) -> None:
        assert not allows({"Authorization": value})

    def test_query_token(self) -> None:
        assert allows(url=URL(f"ws://chat.example/ws?token={TOKEN}"))
        assert allows(url=URL(f"ws://chat.example/ws?a=1&token={TOKEN}"))
        assert not allows(url=URL("ws://chat.example/ws?token=nope"))
        assert not allows(url=URL("ws://chat.example/ws?token="))
        assert not allows(url=URL(f"ws://chat.example/ws?tok={TOKEN}"))

    def test_query_token_is_url_decoded(self) -> None:
        auth = TokenAuth("a b&c", "c")
        assert allows(url=URL("http://x/?token=a%20b%26c"), auth=auth)

    def test_cookie_holds_an_hmac_not_the_token(self) -> None:
        value = AUTH.cookie_value
        assert TOKEN not in value and len(value) == 64
        assert allows(cookies={"loopgate_web": value})
        assert not allows(cookies={"loopgate_web": TOKEN})
        assert not allows(cookies={"loopgate_web": ""})
        assert not allows(cookies={"other_cookie": value})

    def test_cookie_value_depends_on_token_and_cookie_name(self) -> None:
        values = {
            AUTH.cookie_value,
            TokenAuth(TOKEN, "loopgate_admin").cookie_value,
            TokenAuth(TOKEN + "2", "loopgate_web").cookie_value,
        }
        assert len(values) == 3
        assert TokenAuth(TOKEN, "loopgate_web").cookie_value == AUTH.cookie_value

    def test_a_wrong_header_does_not_hide_a_good_cookie(self) -> None:
        assert allows({"Authorization": "Bearer nope"}, cookies={"loopgate_web": AUTH.cookie_value})

    def test_matches(self) -> None:
        assert AUTH.matches(TOKEN)
        assert not AUTH.matches("")
        assert not AUTH.matches(TOKEN.upper())
        assert not AUTH.matches("é" + TOKEN)  # non-ASCII is compared too, not an error


class TestLoginForm:
    @pytest.mark.parametrize(
        ("body", "token"),
        [
            (b"token=abc", "abc"),
            (b"x=1&token=a%2Bb+c", "a+b c"),
            (b"token=first&token=second", "first"),
            (b"", ""),
            (b"tokn=abc", ""),
            (b"token=\xff", "\ufffd"),
        ],
    )
    def test_form_token(self, body: bytes, token: str) -> None:
        assert form_token(body) == token

    def test_login_page_error_only_after_a_failure(self) -> None:
        assert "{error}" not in login_page() and "not right" not in login_page()
        failed = login_page(failed=True)
        assert "not right" in failed and 'action="/login"' in failed
