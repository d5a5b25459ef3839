"""Errors raised by channel adapters.

ChannelError
├── RetryAfter        the platform asked us to slow down (429); carries the delay
├── Forbidden         the bot may not act there (kicked, blocked, missing scope)
├── BadRequest        the platform refused the request as malformed (never retried)
├── FileTooLarge      a file to download is over the size the caller takes
├── NotAccepted       the bot could not take an inbound message now: don't acknowledge it
└── StreamUnsupported the platform refused its native stream (channels.protocol)
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


class FileTooLarge(ChannelError):
    """A download stopped (or never started) because the file is over ``max_bytes``."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"the file has at least {size} bytes, over {max_bytes}")
        self.size = size
        self.max_bytes = max_bytes


class NotAccepted(ChannelError):
    """Raised by an :data:`~channels.protocol.InboundHandler`: the message was *not* stored
    (the service is draining, or its database is unreachable).

    The adapter must not acknowledge the update: a webhook answers 503, a poller does not
    confirm the offset, so the platform delivers the message again later. The redelivery must
    not look like a duplicate: every adapter records an update as seen only once the handler
    returned (:func:`~channels.intake.remember_seen`).
    """
