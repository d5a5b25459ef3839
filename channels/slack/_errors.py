"""Slack SDK failures as :mod:`channels.errors`: one place knows the Slack error codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from channels.errors import BadRequest, ChannelError, Forbidden, RetryAfter

# The token itself is unusable: retrying or reconnecting can't help, an operator must act.
FATAL_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
# The bot may not act in this place (or lacks a scope for it).
FORBIDDEN_ERRORS = FATAL_AUTH_ERRORS | {
    "missing_scope",
    "not_in_channel",
    "channel_not_found",
    "is_archived",
    "restricted_action",
    "ekm_access_denied",
    "not_allowed_token_type",
}


def slack_error_code(exc: SlackApiError) -> str:
    data = exc.response.data if exc.response is not None else None
    if isinstance(data, dict):
        return str(data.get("error") or "unknown_error")
    return "unknown_error"


def retry_after_seconds(exc: SlackApiError, default: float = 1.0) -> float:
    headers = exc.response.headers if exc.response is not None else {}
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(raw))
            except (TypeError, ValueError):
                return default
    return default


@contextmanager
def translate_slack_errors(method: str = "") -> Iterator[None]:
    """Re-raise slack_sdk / aiohttp failures as ``RetryAfter``, ``Forbidden``, ``BadRequest``."""
    try:
        yield
    except SlackApiError as exc:
        code = slack_error_code(exc)
        status = exc.response.status_code if exc.response is not None else 0
        where = f"slack {method}: " if method else "slack: "
        if status == 429 or code == "ratelimited":
            raise RetryAfter(retry_after_seconds(exc), where + "ratelimited") from exc
        if code in FORBIDDEN_ERRORS:
            raise Forbidden(where + code) from exc
        if status >= 500:
            raise ChannelError(f"{where}HTTP {status} {code}") from exc
        raise BadRequest(where + code) from exc
    except (TimeoutError, SlackClientError, aiohttp.ClientError) as exc:
        raise ChannelError(f"slack {method}: {type(exc).__name__}: {exc}") from exc
