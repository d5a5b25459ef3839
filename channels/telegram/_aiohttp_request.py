"""A python-telegram-bot request class on aiohttp: the same contract as PTB's ``HTTPXRequest``.

Why: every reply makes several Bot API calls, and an httpx POST costs about six times the CPU of
an aiohttp one (issue 16). Semantics follow ``HTTPXRequest`` (PTB 22): the same constructor
defaults, the same default-timeout resolution, the same bodies (urlencoded form, or
``multipart/form-data`` when files are uploaded) and the same errors: a timeout is
:class:`~telegram.error.TimedOut`, any other transport failure
:class:`~telegram.error.NetworkError`; status and body go back untouched for PTB to parse.

Differences that cannot be avoided: HTTP/1.1 only (aiohttp has no HTTP/2), no socket options,
HTTP proxies only (no SOCKS). Without a ``proxy``, ``HTTP(S)_PROXY``/``NO_PROXY`` apply as with
httpx, read when the session opens.
"""

from __future__ import annotations

import asyncio
import io
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from aiohttp.payload import TOO_LARGE_BYTES_BODY
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL

__all__ = ["AiohttpRequest"]

_POOL_TIMEOUT_MESSAGE = (
    "Pool timeout: All connections in the connection pool are occupied. "
    "Request was *not* sent to Telegram. Consider adjusting the connection "
    "pool size or the pool timeout."
)
_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class AiohttpRequest(BaseRequest):
    """:class:`telegram.request.BaseRequest` on one :class:`aiohttp.ClientSession`.

    The session is created in :meth:`initialize` (or on the first request), inside the running
    loop, and closed by :meth:`shutdown`; initialize/shutdown may repeat.
    """

    __slots__ = (
        "_connect_timeout",
        "_env_proxies",
        "_media_write_timeout",
        "_pool_size",
        "_pool_timeout",
        "_proxy",
        "_read_timeout",
        "_session",
        "_shut_down",
        "_slots",
        "_write_timeout",
    )

    def __init__(
        self,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        http_version: str = "1.1",
        proxy: str | None = None,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        if http_version != "1.1":
            raise ValueError("AiohttpRequest speaks HTTP/1.1 only (`http_version` must be '1.1')")
        if connection_pool_size < 1:
            raise ValueError("connection_pool_size must be at least 1")
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._media_write_timeout = media_write_timeout
        self._proxy = proxy
        self._env_proxies: dict[str, tuple[str | None, aiohttp.BasicAuth | None]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._shut_down = False
        self._slots: asyncio.Semaphore | None = None

    @property
    def http_version(self) -> str:
        return "1.1"

    @property
    def read_timeout(self) -> float | None:
        """The default read timeout; PTB adds getUpdates' long-poll timeout to it."""
        return self._read_timeout

    async def initialize(self) -> None:
        self._shut_down = False
        if self._session is None or self._session.closed:
            self._open()

    async def shutdown(self) -> None:
        self._shut_down = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        # The pool is a semaphore of the connector's size held for the whole request, so waiting
        # for a connection is timed by pool_timeout alone and reported as PTB's pool timeout
        # (aiohttp's own wait is folded into its connect timeout, indistinguishable from a slow
        # connect); the connector's limit is then never the one that makes a request wait.
        self._slots = asyncio.Semaphore(self._pool_size)
        self._env_proxies.clear()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._pool_size),
            # Not trust_env: aiohttp would read the environment (and ~/.netrc) on every
            # request, half a millisecond of CPU each; _proxy_for reads it once per host.
            trust_env=False,
            # PTB parses the body; aiohttp must not raise on 4xx/5xx or follow redirects
            # differently from httpx (which does not follow them either).
            raise_for_status=False,
        )
        return self._session

    def _proxy_for(self, url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
        if self._proxy is not None:
            return self._proxy, None
        end = url.find("/", url.find("//") + 2)
        origin = url if end < 0 else url[:end]
        found = self._env_proxies.get(origin)
        if found is None:
            try:
                proxy, auth = get_env_proxy_for_url(URL(url))
                found = (str(proxy), auth)
            except LookupError:  # no proxy for this host
                found = (None, None)
            self._env_proxies[origin] = found
        return found

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._shut_down:  # as HTTPXRequest: shut down means closed until initialize()
            raise RuntimeError("This AiohttpRequest is not initialized!")
        session = self._session
        if session is None or session.closed:
            # Like HTTPXRequest, whose client exists from the constructor on, a request made
            # before initialize() works; the session needs the running loop, hence here.
            session = self._open()
        slots = self._slots
        assert slots is not None

        files = request_data.multipart_data if request_data else None
        params = request_data.json_parameters if request_data else None

        if isinstance(read_timeout, DefaultValue):
            read_timeout = self._read_timeout
        if isinstance(connect_timeout, DefaultValue):
            connect_timeout = self._connect_timeout
        if isinstance(pool_timeout, DefaultValue):
            pool_timeout = self._pool_timeout
        if isinstance(write_timeout, DefaultValue):
            write_timeout = self._write_timeout if not files else self._media_write_timeout

        # httpx's read timeout bounds each wait for response bytes; aiohttp's sock_read is the
        # same clock (started once the body is sent, reset by every chunk). Connect covers
        # DNS + TCP (+ TLS) in both; the pool wait is ours (see _open). aiohttp has no write
        # timeout and no read clock while sending, so an upload gets a total bound of
        # connect + write + read instead; small form bodies fit the socket buffer and are
        # not bounded separately (a total timer per call costs CPU for nothing).
        total = None
        bounds = (connect_timeout, write_timeout, read_timeout)
        if files and all(bound is not None for bound in bounds):
            total = sum(bound for bound in bounds if bound is not None)
        timeout = aiohttp.ClientTimeout(
            total=total,
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout,
        )

        proxy, proxy_auth = self._proxy_for(url)
        body: aiohttp.FormData | bytes | None = None
        headers = {"User-Agent": self.USER_AGENT}
        if files:
            # What httpx sends for data= plus files=: the plain fields, then one part per file.
            # quote_fields=False: file names go raw (UTF-8, quotes escaped) as httpx sends
            # them, not percent-encoded; aiogram posts to Telegram the same way.
            form = aiohttp.FormData(quote_fields=False, default_to_multipart=True)
            for name, value in (params or {}).items():
                form.add_field(name, value)
            for name, (filename, content, mimetype) in files.items():
                # Over 1 MiB, raw bytes make aiohttp warn that the body blocks the event loop;
                # a file object is streamed in chunks instead (an upload of send_file).
                if isinstance(content, bytes) and len(content) > TOO_LARGE_BYTES_BODY:
                    content = io.BytesIO(content)
                form.add_field(name, content, filename=filename, content_type=mimetype)
            body = form
        elif params:
            body = urlencode(params).encode()
            headers.update(_FORM)

        if slots.locked():
            try:
                async with asyncio.timeout(pool_timeout):
                    await slots.acquire()
            except TimeoutError as exc:
                raise TimedOut(message=_POOL_TIMEOUT_MESSAGE) from exc
        else:
            await slots.acquire()  # free: returns without suspending
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=timeout,
                proxy=proxy,
                proxy_auth=proxy_auth,
                allow_redirects=False,
            ) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp's ServerTimeoutError is one too
            raise TimedOut from exc
        except (aiohttp.ClientError, OSError) as exc:
            # The class name helps when the message is empty, as in HTTPXRequest.
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        finally:
            slots.release()
