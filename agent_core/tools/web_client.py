"""HTTP for the web tools: every hop checked by the SSRF guard and pinned to the checked address.

httpx would resolve a URL's host itself, a second lookup that a rebinding DNS server can answer
differently. So each request goes to the address :meth:`WebGuard.check` returned (the URL's host
replaced by it) while the ``Host`` header and the TLS server name (httpx's ``sni_hostname``
extension, also the name the certificate is verified against) stay the URL's host. Redirects are
followed here, one hop at a time, each checked again: a public page that redirects to
``http://169.254.169.254/`` gets no connection there. Keep-alive is off so that no connection made
for one host name is reused for another that shares its address. Proxies from the environment
are ignored (a proxy would resolve the name itself).

The body is read up to ``max_bytes`` (counted after decompression, so a gzip bomb stops there
too) and the whole exchange, every hop and lookup included, has ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from agent_core.errors import ToolError
from agent_core.tools.ssrf import Destination, WebGuard

log = structlog.get_logger(__name__)

MAX_BYTES = 2 << 20
TIMEOUT = 15.0
MAX_REDIRECTS = 5
USER_AGENT = "Loopgate/0.1 (web_fetch; +https://github.com/loopgate)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class WebLimits:
    max_bytes: int = MAX_BYTES
    timeout: float = TIMEOUT
    max_redirects: int = MAX_REDIRECTS


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str
    """The URL that answered, after redirects."""
    status: int
    content_type: str
    body: bytes
    truncated: bool = False
    """The body was longer than ``max_bytes``: only its start is here."""
    redirects: int = 0
    headers: Mapping[str, str] | None = None

    @property
    def mime(self) -> str:
        return self.content_type.split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.content_type.split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip("\"'")
        return None


class WebClient:
    """One process's guarded HTTP client for the web tools; close it with :meth:`aclose`."""

    def __init__(
        self,
        guard: WebGuard,
        limits: WebLimits | None = None,
        *,
        verify: Any = True,
        user_agent: str = USER_AGENT,
        pool: _Pool | None = None,
    ) -> None:
        """``verify``: httpx's TLS verification (an ``ssl.SSLContext`` for tests); ``pool``:
        another client's (:meth:`for_tool`)."""
        self.guard = guard
        self.limits = limits or WebLimits()
        self._pool = pool or _Pool(self.limits.timeout, verify, user_agent)

    def for_tool(self, tool: str, *, extra_hosts: tuple[str, ...] = ()) -> WebClient:
        """A client sharing this one's HTTP client whose refusals name ``tool``, with
        ``extra_hosts`` opened (a search provider's own host)."""
        guard = self.guard.with_tool(tool, extra_hosts=extra_hosts)
        return WebClient(guard, self.limits, pool=self._pool)

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        follow_redirects: bool = True,
    ) -> Fetched:
        """Raises :class:`~agent_core.tools.ssrf.Refused` or :class:`ToolError`."""
        tool = self.guard.tool
        try:
            async with asyncio.timeout(self.limits.timeout):
                return await self._follow(method, url, headers, params, json, follow_redirects)
        except TimeoutError:
            raise ToolError(
                tool, f"{url}: no complete answer within {self.limits.timeout:g} s"
            ) from None

    async def _follow(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        params: Mapping[str, str] | None,
        json: Any,
        follow: bool,
    ) -> Fetched:
        tool = self.guard.tool
        try:
            current = httpx.URL(url, params=params) if params else httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise ToolError(tool, f"not a valid URL: {url!r} ({exc})") from exc
        for hop in range(self.limits.max_redirects + 1):
            destination = await self.guard.check(
                current.scheme, current.raw_host.decode("ascii"), _port(current)
            )
            response = await self._send(method, current, destination, headers, json)
            location = response.headers.get("location")
            if not (follow and response.status_code in _REDIRECTS and location):
                return await self._read(response, current, hop)
            await response.aclose()
            try:
                current = current.join(location)
            except (httpx.InvalidURL, ValueError) as exc:
                raise ToolError(tool, f"a redirect to an invalid URL: {location!r}") from exc
            log.debug("web.redirect", tool=tool, hop=hop + 1, host=current.host)
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method == "POST"
            ):
                method, json = "GET", None
        raise ToolError(tool, f"more than {self.limits.max_redirects} redirects, from {url}")

    async def _send(
        self,
        method: str,
        url: httpx.URL,
        destination: Destination,
        headers: Mapping[str, str] | None,
        json: Any,
    ) -> httpx.Response:
        tool = self.guard.tool
        # The checked addresses, in order, and no others: a failed connection tries the next.
        last: Exception | None = None
        for address in destination.addresses:
            client = self._pool.client()
            request = client.build_request(
                method,
                url.copy_with(host=address),
                headers={**(headers or {}), "Host": url.netloc.decode("ascii")},
                json=json,
                extensions={"sni_hostname": url.raw_host.decode("ascii")}
                if url.scheme == "https"
                else {},
            )
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                last = exc
            except httpx.HTTPError as exc:
                raise ToolError(tool, f"{url}: {_describe(exc)}") from exc
        raise ToolError(tool, f"{url}: could not connect ({_describe(last)})")

    async def _read(self, response: httpx.Response, url: httpx.URL, hops: int) -> Fetched:
        limit = self.limits.max_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False
        try:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    truncated = True
                    break
        except httpx.HTTPError as exc:
            raise ToolError(self.guard.tool, f"{url}: {_describe(exc)}") from exc
        finally:
            await response.aclose()
        body = b"".join(chunks)[:limit]
        return Fetched(
            str(url),
            response.status_code,
            response.headers.get("content-type", ""),
            body,
            truncated,
            hops,
            dict(response.headers),
        )


class _Pool:
    """The httpx client, made on the first request: its TLS context costs a start-up nothing."""

    def __init__(self, timeout: float, verify: Any, user_agent: str) -> None:
        self._settings = (timeout, verify, user_agent)
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout, verify, user_agent = self._settings
            self._client = httpx.AsyncClient(
                verify=verify,
                trust_env=False,
                follow_redirects=False,
                timeout=timeout,
                limits=httpx.Limits(max_keepalive_connections=0),
                headers={"User-Agent": user_agent},
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _port(url: httpx.URL) -> int:
    if url.port is not None:
        return url.port
    return 443 if url.scheme == "https" else 80


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no address"
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"
