"""Platform adapters. Knows platforms, nothing of LLMs."""

from channels.errors import BadRequest, ChannelError, Forbidden, NotAccepted, RetryAfter
from channels.protocol import (
    Channel,
    InboundHandler,
    MessageEditor,
    NativeStreaming,
    PlatformStream,
    ProgressReporter,
    SeenStore,
    SentLookup,
    StateStore,
    StreamUnsupported,
    WebhookReceiver,
)
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
    "MessageEditor",
    "MessageRef",
    "NativeStreaming",
    "NotAccepted",
    "PlatformStream",
    "ProgressReporter",
    "RetryAfter",
    "SeenStore",
    "Sender",
    "SentLookup",
    "StateStore",
    "StreamUnsupported",
    "WebhookReceiver",
]
