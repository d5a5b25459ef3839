"""Downloading a file a platform serves over plain HTTP(S) (Slack's ``url_private_download``,
Zalo's photo URLs), read in chunks and cut off past a size limit: a platform that states no
size, or a wrong one, must not make the bot hold a gigabyte in memory."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from channels.errors import ChannelError, FileTooLarge

log = structlog.get_logger(__name__)

DOWNLOAD_TIMEOUT = 60.0
_CHUNK = 64 * 1024


async def download(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_bytes: int | None = None,
    seconds: float = DOWNLOAD_TIMEOUT,
    html_is_error: bool = False,
) -> bytes:
    """The body of ``GET url``. Raises :class:`FileTooLarge` past ``max_bytes`` (from the
    stated ``Content-Length`` before reading, else while reading), :class:`ChannelError` for a
    failed request or an HTTP error, and with ``html_is_error`` for a web page (Slack answers
    a file request it does not authorize with its sign-in page, status 200)."""
    import aiohttp  # with the first file, not at start-up

    client_timeout = aiohttp.ClientTimeout(total=seconds)
    try:
        async with (
            aiohttp.ClientSession(timeout=client_timeout) as session,
            session.get(url, headers=dict(headers or {})) as resp,
        ):
            if resp.status >= 400:
                raise ChannelError(f"download failed: HTTP {resp.status}")
            if html_is_error and resp.content_type == "text/html":
                raise ChannelError("download refused: the platform answered with a web page")
            if max_bytes is not None and (resp.content_length or 0) > max_bytes:
                raise FileTooLarge(resp.content_length or 0, max_bytes)
            body = bytearray()
            async for chunk in resp.content.iter_chunked(_CHUNK):
                body += chunk
                if max_bytes is not None and len(body) > max_bytes:
                    raise FileTooLarge(len(body), max_bytes)
            return bytes(body)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ChannelError(f"download failed: {type(exc).__name__}: {exc}") from exc
