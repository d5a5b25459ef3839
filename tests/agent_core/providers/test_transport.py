"""The providers' HTTP plumbing: JSON bodies, response text, errors, proxies and the endpoint."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import trustme
from multidict import CIMultiDict, CIMultiDictProxy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable
from agent_core.providers import _transport
from agent_core.providers._transport import (
    DeltaHandlerFailed,
    JsonEndpoint,
    decode_text,
    encode_json,
    env_proxy,
    parse_retry_after,
    translate_errors,
)
from tests.fakes.server import FakeServer


@dataclass
class Answer:
    status: int = 200
    body: bytes = b'{"ok":true}'
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: Mapping[str, str]
    body: bytes


class FakeApi(FakeServer):
    """One POST endpoint answering what the test queued, recording every request."""

    name = "FakeApi"

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[Answer] = []
        self.requests: list[Seen] = []

    def app(self) -> Starlette:
        async def handle(request: Request) -> Response:
            self.requests.append(Seen(request.url.path, request.headers, await request.body()))
            self.changed()
            answer = self.answers.pop(0) if self.answers else Answer()
            if answer.delay:
                # A slow peer, for the read timeout; ends early when the fake stops.
                await asyncio.wait(
                    {asyncio.ensure_future(self.closing.wait())}, timeout=answer.delay
                )
            return Response(
                answer.body,
                status_code=answer.status,
                headers={"Content-Type": answer.content_type, **answer.headers},
            )

        return Starlette(routes=[Route("/{path:path}", handle, methods=["POST", "GET"])])


class StatusFailure(Exception):
    def __init__(self, status: int, reason: str | None, headers: Mapping[str, str], text: str):
        super().__init__(f"{status} {reason}: {text}")
        self.status, self.reason, self.headers, self.text = status, reason, headers, text


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with FakeApi() as server:
        yield server


@pytest.fixture
async def endpoint(api: FakeApi) -> AsyncIterator[JsonEndpoint]:
    point = JsonEndpoint(
        f"{api.base_url}/v1/chat",
        {"Authorization": "Bearer k"},
        StatusFailure,
        timeout=5.0,
        connect_timeout=5.0,
    )
    yield point
    await point.aclose()


# -- bodies and text ---------------------------------------------------------------------------


def test_json_bodies_are_compact_utf8() -> None:
    body = encode_json({"text": "Hà Nội", "n": [1, 2]})
    assert body == '{"text":"Hà Nội","n":[1,2]}'.encode()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_json_bodies_refuse_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError):
        encode_json({"temperature": value})


def test_text_uses_the_declared_charset_else_utf8() -> None:
    assert decode_text("é".encode("latin-1"), "latin-1") == "é"
    assert decode_text("é".encode(), None) == "é"
    assert decode_text(b"ok \xff", None) == "ok \ufffd"
    assert decode_text("é".encode(), "no-such-charset") == "é"


# -- Retry-After -------------------------------------------------------------------------------


def test_parse_retry_after_variants() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert parse_retry_after(httpx.Headers({"Retry-After": "Mon, 01 Jan 2001 00:00:00 GMT"})) == 0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers()) is None

    # aiohttp's headers: a case-insensitive multidict.
    headers = CIMultiDictProxy(CIMultiDict({"Retry-After": "3", "X-Other": "1"}))
    assert parse_retry_after(headers) == 3.0
    assert parse_retry_after(CIMultiDictProxy(CIMultiDict({"Retry-After-Ms": "250"}))) == 0.25


def test_retry_after_prefers_milliseconds_and_falls_back_when_they_are_bad() -> None:
    both = httpx.Headers({"Retry-After": "9", "retry-after-ms": "100"})
    assert parse_retry_after(both) == 0.1
    assert parse_retry_after(httpx.Headers({"Retry-After": "9", "retry-after-ms": "x"})) == 9.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "x"})) is None


def test_retry_after_is_never_negative() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "-5"})) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "-5"})) == 0.0


def test_retry_after_as_a_future_http_date_is_the_seconds_until_then() -> None:
    when = datetime.now(UTC) + timedelta(seconds=120)
    waited = parse_retry_after(httpx.Headers({"Retry-After": format_datetime(when, usegmt=True)}))
    assert waited is not None and 100 < waited <= 120
    # A date without a zone ("-0000" in RFC 2822) is not an HTTP date.
    naive = "Mon, 01 Jan 2101 00:00:00 -0000"
    assert parse_retry_after(httpx.Headers({"Retry-After": naive})) is None


# -- proxies and certificates ------------------------------------------------------------------


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_proxy_comes_from_the_environment(no_proxy_env: pytest.MonkeyPatch) -> None:
    monkeypatch = no_proxy_env
    assert env_proxy("https://api.openai.com/v1/chat/completions") is None

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.local:3128"
    assert env_proxy("http://127.0.0.1:11434/v1/chat/completions") is None


def test_the_proxy_follows_the_scheme_then_all_proxy(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://plain.local:1")
    no_proxy_env.setenv("ALL_PROXY", "socks5://all.local:2")
    assert env_proxy("http://api.example/v1") == "http://plain.local:1"
    assert env_proxy("https://api.example/v1") == "socks5://all.local:2"


def test_certificates_come_from_ssl_cert_file(monkeypatch: pytest.MonkeyPatch) -> None:
    _transport._ssl_context.cache_clear()
    try:
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
        with pytest.raises(FileNotFoundError):
            _transport._ssl_context()
        monkeypatch.delenv("SSL_CERT_FILE")
        assert _transport._ssl_context().cert_store_stats()["x509_ca"] > 0  # certifi's
    finally:
        _transport._ssl_context.cache_clear()


class TlsApi(FakeApi):
    """:class:`FakeApi` over HTTPS, with a certificate of a test CA."""

    def __init__(self, certfile: str) -> None:
        super().__init__()
        self.certfile = certfile

    def server_options(self) -> dict[str, Any]:
        return {"ssl_certfile": self.certfile, "ssl_keyfile": self.certfile}

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}"


async def test_https_verifies_with_the_configured_bundle_and_http_loads_none(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    _transport._ssl_context.cache_clear()
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        # A plain-HTTP model server (a local one) never builds the certificate context.
        plain = JsonEndpoint(f"{api.base_url}/v1", {}, StatusFailure, timeout=5, connect_timeout=5)
        try:
            assert await plain.post_json({}) == '{"ok":true}'
        finally:
            await plain.aclose()
        assert _transport._ssl_context.cache_info().currsize == 0
        with ca.issue_cert("localhost").private_key_and_cert_chain_pem.tempfile() as both:
            async with TlsApi(both) as tls:
                secure = JsonEndpoint(f"{tls.base_url}/v1", {}, StatusFailure, timeout=5,
                                      connect_timeout=5)  # fmt: skip
                try:  # trusted only through SSL_CERT_FILE: the test CA is in no other store
                    assert await secure.post_json({}) == '{"ok":true}'
                finally:
                    await secure.aclose()
        assert _transport._ssl_context.cache_info().currsize == 1
    finally:
        _transport._ssl_context.cache_clear()


# -- translate_errors --------------------------------------------------------------------------


def test_timeouts_become_provider_timeouts() -> None:
    with (
        pytest.raises(ProviderTimeout, match=r"^p: request timed out \(SocketTimeoutError\)$"),
        translate_errors("p", str),
    ):
        raise aiohttp.SocketTimeoutError()


def test_connection_failures_become_unavailable_with_the_key_redacted() -> None:
    with (
        pytest.raises(ProviderUnavailable) as caught,
        translate_errors("p", lambda text: text.replace("sk-secret", "***")),
    ):
        raise aiohttp.ClientConnectionError("refused for key sk-secret")
    assert str(caught.value) == "p: connection failed: refused for key ***"
    assert caught.value.transient
    with (
        pytest.raises(ProviderUnavailable, match=r"^p: connection failed: ConnectionResetError$"),
        translate_errors("p", str),
    ):
        raise ConnectionResetError()


@pytest.mark.parametrize("error", [KeyError("index"), TypeError("x"), AttributeError("y")])
def test_malformed_answers_become_provider_errors(error: Exception) -> None:
    with (
        pytest.raises(ProviderError, match=r"^p: malformed response: ") as caught,
        translate_errors("p", str),
    ):
        raise error
    assert type(caught.value) is ProviderError
    assert caught.value.__cause__ is error


def test_other_errors_and_a_delta_handlers_failure_pass_untouched() -> None:
    original = RuntimeError("the channel's edit failed")
    with pytest.raises(DeltaHandlerFailed) as caught, translate_errors("p", str):
        raise DeltaHandlerFailed(original)
    assert caught.value.original is original
    with pytest.raises(RuntimeError, match="boom"), translate_errors("p", str):
        raise RuntimeError("boom")


# -- JsonEndpoint ------------------------------------------------------------------------------


async def test_post_json_sends_the_body_and_headers_and_returns_the_text(
    api: FakeApi, endpoint: JsonEndpoint
) -> None:
    api.answers.append(
        Answer(body='{"réponse":1}'.encode("latin-1"), content_type="text/plain; charset=latin-1")
    )
    assert await endpoint.post_json({"q": "é"}) == '{"réponse":1}'
    [seen] = api.requests
    assert seen.path == "/v1/chat"
    assert seen.body == '{"q":"é"}'.encode()
    assert seen.headers["authorization"] == "Bearer k"
    assert "text/event-stream" not in seen.headers.get("accept", "")


async def test_an_http_error_is_the_providers_own_error(
    api: FakeApi, endpoint: JsonEndpoint
) -> None:
    api.answers.append(Answer(429, b'{"error":"slow down"}', headers={"Retry-After": "7"}))
    with pytest.raises(StatusFailure) as caught:
        await endpoint.post_json({})
    failure = caught.value
    assert (failure.status, failure.reason, failure.text) == (
        429,
        "Too Many Requests",
        '{"error":"slow down"}',
    )
    assert failure.headers["retry-after"] == "7"
    api.answers.append(Answer(500, b"down"))
    with pytest.raises(StatusFailure, match="down"):
        async with endpoint.post_for_stream({}):
            raise AssertionError("no stream for an error")


async def test_redirects_are_not_followed(api: FakeApi, endpoint: JsonEndpoint) -> None:
    api.answers.append(Answer(302, b"moved", headers={"Location": f"{api.base_url}/elsewhere"}))
    assert await endpoint.post_json({}) == "moved"
    assert [seen.path for seen in api.requests] == ["/v1/chat"]


async def test_a_stream_yields_its_events(api: FakeApi, endpoint: JsonEndpoint) -> None:
    api.answers.append(
        Answer(body=b"data: one\n\nevent: end\ndata: two\n\n", content_type="text/event-stream")
    )
    async with endpoint.post_for_stream({"stream": True}) as answer:
        assert not isinstance(answer, str)
        events = [(event.event, event.data) async for event in answer]
    assert events == [("message", "one"), ("end", "two")]
    assert api.requests[0].headers["accept"] == "text/event-stream"
    assert api.requests[0].headers["authorization"] == "Bearer k"


async def test_a_json_answer_to_a_stream_request_is_its_text(
    api: FakeApi, endpoint: JsonEndpoint
) -> None:
    api.answers.append(Answer(body=b'{"choices":[]}'))
    async with endpoint.post_for_stream({"stream": True}) as answer:
        assert answer == '{"choices":[]}'


async def test_a_peer_silent_past_the_timeout_times_out(api: FakeApi) -> None:
    point = JsonEndpoint(f"{api.base_url}/v1", {}, StatusFailure, timeout=0.3, connect_timeout=5.0)
    api.answers.append(Answer(delay=30))
    started = time.monotonic()
    try:
        with pytest.raises(ProviderTimeout), translate_errors("p", str):
            await point.post_json({})
    finally:
        await point.aclose()
    assert time.monotonic() - started < 5


async def test_an_unreachable_server_is_unavailable() -> None:
    async with FakeApi() as gone:
        url = f"{gone.base_url}/v1"
    point = JsonEndpoint(url, {}, StatusFailure, timeout=5.0, connect_timeout=5.0)
    try:
        with (
            pytest.raises(ProviderUnavailable, match="connection failed"),
            translate_errors("p", str),
        ):
            await point.post_json({})
    finally:
        await point.aclose()


async def test_only_an_own_session_is_closed(api: FakeApi) -> None:
    unused = JsonEndpoint(api.base_url, {}, StatusFailure, timeout=1, connect_timeout=1)
    await unused.aclose()  # no session was made: nothing to close
    async with aiohttp.ClientSession() as shared:
        borrowed = JsonEndpoint(
            api.base_url, {}, StatusFailure, timeout=1, connect_timeout=1, session=shared
        )
        assert json.loads(await borrowed.post_json({})) == {"ok": True}
        await borrowed.aclose()
        assert not shared.closed
    own = JsonEndpoint(api.base_url, {}, StatusFailure, timeout=1, connect_timeout=1)
    await own.post_json({})
    session = own._session
    await own.aclose()
    assert session is not None and session.closed


async def test_a_passed_session_ignores_the_environments_proxy(
    no_proxy_env: pytest.MonkeyPatch, api: FakeApi
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    own = JsonEndpoint("http://api.example/v1", {}, StatusFailure, timeout=1, connect_timeout=1)
    assert own._proxy == "http://127.0.0.1:9"
    async with aiohttp.ClientSession() as shared:
        borrowed = JsonEndpoint(
            f"{api.base_url}/v1", {}, StatusFailure, timeout=1, connect_timeout=1, session=shared
        )
        assert borrowed._proxy is None
        assert json.loads(await borrowed.post_json({})) == {"ok": True}
