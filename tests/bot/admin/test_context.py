"""What every dashboard handler shares (``bot/admin/context.py``): who is asking, where the
dashboard is mounted, JSON out, form and JSON bodies in, and the templates' filters."""

from __future__ import annotations

from datetime import UTC, datetime

from jinja2 import DictLoader, Environment, select_autoescape
from starlette.requests import Request
from starlette.types import Message

from bot.admin.auth import AdminSessions, LoginLimiter, Session
from bot.admin.context import NAV, Admin, Who, form_fields, json_body, json_response, prefix
from bot.admin.runs import RunTracker
from bot.app import Loopgate
from tests.admin_support import TOKEN


def request_with(body: bytes = b"", content_type: str = "", root_path: str = "/admin") -> Request:
    headers = [(b"content-type", content_type.encode())] if content_type else []
    chunks = [body]

    async def receive() -> Message:
        return {"type": "http.request", "body": chunks.pop() if chunks else b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": f"{root_path}/x", "headers": headers,
             "root_path": root_path}  # fmt: skip
    return Request(scope, receive)


def test_who_is_recorded_with_how_it_signed_in() -> None:
    assert Who("bearer").actor == "admin (bearer)"
    assert Who("session", Session("s1", 0.0), "csrf").actor == "admin (session)"


def test_prefix_is_the_mount_without_its_slash() -> None:
    assert prefix(request_with(root_path="/admin")) == "/admin"
    assert prefix(request_with(root_path="/proxy/admin/")) == "/proxy/admin"
    bare = Request({"type": "http", "method": "GET", "path": "/", "headers": []})
    assert prefix(bare) == ""


def test_json_writes_odd_values_as_text_and_keeps_unicode() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    response = json_response({"at": when, "text": "ẞ ✓"}, 409, **{"Retry-After": "3"})
    assert response.status_code == 409 and response.headers["retry-after"] == "3"
    assert bytes(response.body).decode() == '{"at": "2026-01-02 03:04:05+00:00", "text": "ẞ ✓"}'


class TestFormFields:
    async def test_first_value_of_each_field_blanks_kept(self) -> None:
        request = request_with(
            b"a=1&a=2&empty=&next=%2Fadmin%2Fruns", "application/x-www-form-urlencoded"
        )
        fields = await form_fields(request)
        assert fields == {"a": "1", "empty": "", "next": "/admin/runs"}
        assert await form_fields(request) is fields  # the gate and the handler share one read

    async def test_other_bodies_have_no_fields(self) -> None:
        for content_type in ("application/json", "multipart/form-data; boundary=x", ""):
            request = request_with(b"a=1", content_type)
            assert await form_fields(request) == {}, content_type

    async def test_bad_bytes_are_replaced_not_an_error(self) -> None:
        request = request_with(b"name=\xff\xfe", "application/x-www-form-urlencoded")
        assert await form_fields(request) == {"name": "\ufffd\ufffd"}


class TestJsonBody:
    async def test_an_object(self) -> None:
        assert await json_body(request_with(b'{"model": "m"}')) == {"model": "m"}
        assert await json_body(request_with(b"")) == {}  # no body: no fields

    async def test_anything_else_is_none(self) -> None:
        for body in (b"[1]", b'"text"', b"3", b"{", b"\xff\xfe"):
            assert await json_body(request_with(body)) is None, body


async def test_render_escapes_and_gives_every_page_its_context(app: Loopgate) -> None:
    templates = Environment(
        loader=DictLoader(
            {
                "t.html": "{{ prefix }}|{{ csrf }}|{{ key|urlpart }}|{{ data|pretty }}|"
                "{{ html }}|{{ nav|length }}"
            }
        ),
        autoescape=select_autoescape(default=True),
    )
    tracker = RunTracker(app)
    admin = Admin(app, AdminSessions(TOKEN, max_age=60), LoginLimiter(), tracker, templates)
    who = Who("session", Session("s1", 0.0), "the-csrf")
    response = admin.render(
        request_with(),
        "t.html",
        who,
        status=201,
        key="agent:main:web/x y",
        data={"k": "é"},
        html="<b>",
    )
    tracker.close()
    assert response.status_code == 201
    assert bytes(response.body).decode() == (
        "/admin|the-csrf|agent%3Amain%3Aweb%2Fx%20y|{\n  &#34;k&#34;: &#34;é&#34;\n}|&lt;b&gt;|"
        + str(len(NAV))  # every page of the navigation
    )
    anonymous = admin.render(request_with(), "t.html", None, key="", data=None, html="")
    assert bytes(anonymous.body).decode().split("|")[1] == ""
