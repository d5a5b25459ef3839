"""Platform adapters. Knows platforms, nothing of LLMs."""

from channels.errors import BadRequest, ChannelError, Forbidden, RetryAfter
from channels.protocol import Channel, InboundHandler, SeenStore, StateStore, WebhookReceiver
from channels.types import (
    Capabilities,
    ChatRef,
    ChatType,
    Formatting,
    InboundMessage,
    MessageRef,
    Sender,
)

__all__ = [
    "BadRequest",
    "Capabilities",
    "Channel",
    "ChannelError",
    "ChatRef",
    "ChatType",
    "Forbidden",
    "Formatting",
    "InboundHandler",
    "InboundMessage",
    "MessageRef",
    "RetryAfter",
    "SeenStore",
    "Sender",
    "StateStore",
    "WebhookReceiver",
]
