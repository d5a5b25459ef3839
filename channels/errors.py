"""Errors raised by channel adapters.

ChannelError
├── RetryAfter        the platform asked us to slow down (429); carries the delay
├── Forbidden         the bot may not act there (kicked, blocked, missing scope)
└── BadRequest        the platform refused the request as malformed (never retried)
"""

from __future__ import annotations


class ChannelError(Exception):
    """Base class for every error an adapter raises."""


class RetryAfter(ChannelError):
    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after:.1f}s)")
        self.retry_after = retry_after


class Forbidden(ChannelError):
    pass


class BadRequest(ChannelError):
    pass
