"""Zalo Bot API failures, translated into the channel error tree.

ChannelError
├── RetryAfter          HTTP 429 / error_code 429: not accepted, safe to resend after the delay
├── Forbidden           403 / error_code 403: the bot may not do this (blocked, not a member)
│   └── ZaloTokenInvalid    401 or error_code 401: the bot token is wrong or was reset
├── BadRequest          400 and every other refusal we can't fix by retrying
└── ZaloError           a 2xx answer that is no JSON envelope; the rest below
    ├── ZaloPollIdle        408 on getUpdates: the long poll ended without an event (normal)
    ├── ZaloServerError     5xx: the platform failed; ``status`` tells whether it may have acted
    └── ZaloNetworkError    no HTTP answer; ``request_sent`` says whether the server may have
                            received the request (a connect failure means it did not)

:func:`translate_zalo_errors` maps httpx exceptions; :func:`raise_for_answer` maps an HTTP answer
and its ``{ok, error_code, description}`` envelope. Neither message ever contains the request
URL, because the bot token is part of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from channels.errors import BadRequest, ChannelError, Forbidden, RetryAfter

DEFAULT_RETRY_AFTER = 1.0


class ZaloError(ChannelError):
    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None):
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class ZaloTokenInvalid(Forbidden):
    """The platform refused the bot token. Fix ``channels.zalo.token`` (reset it in Zalo Bot
    Creator if it leaked); retrying does not help."""


class ZaloPollIdle(ZaloError):
    """``getUpdates`` timed out without an event: the idle answer of a long poll."""


class ZaloServerError(ZaloError):
    """A 5xx answer. 502/503/504 come from the front proxy, so the request was not acted on."""

    @property
    def not_processed(self) -> bool:
        return self.status in (502, 503, 504)


class ZaloNetworkError(ZaloError):
    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


# A connect failure (or waiting for a pooled connection) means no byte of the request left us.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@contextmanager
def translate_zalo_errors(method: str) -> Iterator[None]:
    """Turn httpx transport failures of one API call into :class:`ZaloNetworkError`."""
    try:
        yield
    except httpx.TransportError as exc:
        # str(exc) of httpx errors does not include the URL; the type name is enough to debug.
        raise ZaloNetworkError(
            f"Zalo {method}: network error ({type(exc).__name__})",
            request_sent=not isinstance(exc, _NOT_SENT),
        ) from exc


def raise_for_answer(
    method: str, status: int, payload: Any, headers: Mapping[str, str]
) -> dict[str, Any]:
    """Return the envelope when it says ``ok``; raise the matching error otherwise.

    The error code can be in the HTTP status, in ``error_code`` of an HTTP 200 body, or both:
    Zalo is not consistent about it, so the body's code wins when present.
    """
    envelope = payload if isinstance(payload, dict) else {}
    if 200 <= status < 300 and envelope.get("ok") is True:
        return envelope
    code = _int(envelope.get("error_code"))
    effective = code if code is not None else status
    description = str(envelope.get("description") or "")[:200] or f"HTTP {status}"
    text = f"Zalo {method} failed: {description} (HTTP {status}, error_code {code})"
    if effective == 408 or status == 408:
        raise ZaloPollIdle(text, status=status, error_code=code)
    if effective == 429 or status == 429:
        raise RetryAfter(_retry_after(envelope, headers), text)
    if effective == 401 or status == 401:
        raise ZaloTokenInvalid(text)
    if effective == 403:
        raise Forbidden(text)
    if effective >= 500 or status >= 500:
        raise ZaloServerError(text, status=status if status >= 500 else effective, error_code=code)
    if 200 <= status < 300 and not envelope:
        raise ZaloError(f"Zalo {method}: answer is not a JSON envelope", status=status)
    raise BadRequest(text)


def _retry_after(envelope: Mapping[str, Any], headers: Mapping[str, str]) -> float:
    params = envelope.get("parameters")
    candidates = [headers.get("retry-after")]
    if isinstance(params, dict):
        candidates.append(params.get("retry_after"))
    for value in candidates:
        try:
            if value is not None:
                return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return DEFAULT_RETRY_AFTER


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
