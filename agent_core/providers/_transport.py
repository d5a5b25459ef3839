"""The aiohttp plumbing of the HTTP providers: session, request body, response text, errors.

One model call is one aiohttp request: a short streamed answer from the fake LLM costs 0.46 ms
of client CPU against 1.9 ms over httpx/httpx-sse (50 chunks: 1.2 vs 3.9 ms; uvloop). What the
providers promised under httpx still holds: the same timeouts, proxies from the environment,
certificates from certifi (or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), a compact UTF-8 JSON body,
and only :class:`ProviderError` subclasses out, with the API key redacted.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import structlog

from agent_core.errors import AgentError, ProviderError, ProviderTimeout, ProviderUnavailable
from agent_core.providers._sse import ServerSentEvent, aiter_sse

log = structlog.get_logger(__name__)

if TYPE_CHECKING:  # aiohttp (and certifi) load with the first session, not at start-up
    import aiohttp

__all__ = [
    "DeltaHandlerFailed",
    "JsonEndpoint",
    "decode_text",
    "encode_json",
    "env_proxy",
    "new_session",
    "parse_retry_after",
    "translate_errors",
]


def env_proxy(url: str) -> str | None:
    """The proxy for ``url`` from HTTP(S)_PROXY / ALL_PROXY / NO_PROXY, as httpx honoured them.

    Read once, like httpx did when the client was made. (aiohttp's ``trust_env`` would look
    them up, and ~/.netrc, in a worker thread on every request: two thread hops per call.)"""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def new_session(
    url: str, timeout: float, connect_timeout: float, proxy: str | None
) -> aiohttp.ClientSession:
    """A session for one provider at ``url``; call it inside the running loop (aiohttp binds
    to it).

    The timeouts mean what ``httpx.Timeout(timeout, connect=connect_timeout)`` meant:
    ``timeout`` bounds each wait for data (and for a pooled connection), ``connect_timeout``
    opening a connection; a long answer is fine while it flows, so there is no total.
    Certificates are certifi's where TLS is expected (an ``https`` URL or proxy); a plain
    ``http`` endpoint (a local model server) skips loading that bundle (~1 MiB resident) and
    would verify an unexpected redirect to ``https`` with aiohttp's default context."""
    import aiohttp

    tls = url.startswith("https:") or (proxy or "").startswith("https:")

    client_timeout = aiohttp.ClientTimeout(
        total=None,
        connect=timeout + connect_timeout,  # pool wait + connect
        sock_connect=connect_timeout,
        sock_read=timeout,
    )
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=_ssl_context() if tls else True),
        timeout=client_timeout,
        proxy=proxy,
    )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    import certifi

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    return ssl.create_default_context(cafile=certifi.where())


def encode_json(body: dict[str, Any]) -> bytes:
    """Compact UTF-8, as httpx sent it; NaN is refused (ValueError), not sent as invalid JSON."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


BODY_END_WAIT = 5.0
"""Seconds a finished stream's connection may wait, behind the caller, for the rest of its body
(the chunked body's terminator after ``[DONE]``) to go back to the pool instead of closing."""
BODY_END_BYTES = 64 * 1024
"""Bytes read past a stream's last event at most, for the same reason."""

StatusError = Callable[[int, "str | None", Mapping[str, str], str], Exception]
"""Builds the provider's error for an HTTP status >= 400: (status, reason, headers, body text)."""


class JsonEndpoint:
    """One model API's URL over aiohttp: its headers, its session, and the two POSTs a provider
    makes (a JSON answer, or a stream).

    The session is the caller's when one is passed (shared, with its own defaults, which is why
    headers go with every request), else our own, made on first use (aiohttp binds a session to
    the running loop) with the proxy read from the environment once, and closed by
    :meth:`aclose`.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        status_error: StatusError,
        *,
        timeout: float,
        connect_timeout: float,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.url = url
        self._headers = dict(headers)
        self._stream_headers = {**self._headers, "Accept": "text/event-stream"}
        self._status_error = status_error
        self._timeouts = (timeout, connect_timeout)
        self._proxy = env_proxy(url) if session is None else None
        self._owns_session = session is None
        self._session = session
        self._finishing: dict[asyncio.Task[None], aiohttp.ClientResponse] = {}
        """Finished streams whose body's end is still read (behind their callers)."""

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = new_session(self.url, *self._timeouts, self._proxy)
        return self._session

    async def aclose(self) -> None:
        """Close the session, but only if we created it (a passed-in one is the caller's)."""
        for task, resp in list(self._finishing.items()):
            task.cancel()
            resp.close()  # here: a task cancelled before it ran would never release it
        if self._owns_session and self._session is not None:
            await self._session.close()

    async def post_json(self, body: dict[str, Any]) -> str:
        """POST ``body``; the answer's text, or the provider's error raised for HTTP >= 400."""
        async with self._post(body, self._headers) as resp:
            return decode_text(await resp.read(), resp.charset)

    @asynccontextmanager
    async def post_for_stream(
        self, body: dict[str, Any]
    ) -> AsyncIterator[AsyncIterator[ServerSentEvent] | str]:
        """POST ``body`` asking for a stream: yields its events, or the whole answer's text
        when the server ignored the request for a stream and sent one JSON body (some do);
        raises the provider's error for HTTP >= 400."""
        async with self._post(body, self._stream_headers) as resp:
            if "text/event-stream" not in resp.headers.get("Content-Type", ""):
                yield decode_text(await resp.read(), resp.charset)
            else:
                yield aiter_sse(resp.content.iter_any())

    @asynccontextmanager
    async def _post(
        self, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        resp = await self._client().post(
            self.url, data=encode_json(body), headers=headers, allow_redirects=False
        )
        finished = False
        try:
            if resp.status >= 400:
                text = decode_text(await resp.read(), resp.charset)
                raise self._status_error(resp.status, resp.reason, resp.headers, text)
            yield resp
            finished = True
        finally:
            if finished and not resp.content.at_eof():
                # A stream read up to its last event ([DONE], message_stop), not to the end of
                # the body: aiohttp closes such a connection, and the next call would open (for
                # TLS, handshake) a new one. Under load the body's end often comes a moment
                # after the last event; it is read behind the caller.
                task = asyncio.get_running_loop().create_task(
                    _read_to_end(resp), name="provider:body-end"
                )
                self._finishing[task] = resp
                task.add_done_callback(self._finishing.pop)
            else:
                resp.release()
                await resp.wait_for_close()


async def _read_to_end(resp: aiohttp.ClientResponse) -> None:
    """Read what is left of ``resp``'s body (bounded), then release it: pooled at its end,
    closed if the end did not come."""
    try:
        async with asyncio.timeout(BODY_END_WAIT):
            left = BODY_END_BYTES
            while left > 0 and not resp.content.at_eof():
                left -= len(await resp.content.readany())
    except Exception as exc:  # a connection not reused is all that is lost
        log.debug("provider.body_end_unread", error=repr(exc))
    finally:
        resp.release()


def decode_text(body: bytes, charset: str | None) -> str:
    """A response body as text: its declared charset, else UTF-8; bad bytes become U+FFFD."""
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")


@contextmanager
def translate_errors(name: str, redact: Callable[[str], str]) -> Iterator[None]:
    """Turn transport failures into the agent's error tree (timeouts first)."""
    import aiohttp  # loaded by then: the session is

    try:
        yield
    except TimeoutError as exc:
        # asyncio's, aiohttp's ConnectionTimeoutError (connect) and SocketTimeoutError (read)
        raise ProviderTimeout(f"{name}: request timed out ({type(exc).__name__})") from exc
    except (aiohttp.ClientError, OSError) as exc:
        # ClientConnectorError, ServerDisconnectedError, ClientPayloadError (server hung up
        # mid-stream), ClientOSError…
        reason = redact(str(exc)) or type(exc).__name__
        raise ProviderUnavailable(f"{name}: connection failed: {reason}") from exc
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # A body that is JSON but not shaped like a completion (wrong types somewhere, or an
        # Anthropic stream event without its ``index``).
        raise ProviderError(f"{name}: malformed response: {exc}") from exc


class DeltaHandlerFailed(AgentError):
    """Carries an exception raised by ``on_delta`` past :func:`translate_errors`: the caller's
    own failure (e.g. a channel's HTTP edit) must reach it untranslated."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``.

    ``headers`` must look names up case-insensitively (aiohttp's and httpx's headers do)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        return None
    return max(0.0, when.timestamp() - time.time())
