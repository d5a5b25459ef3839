"""Zalo Bot Platform channel: a small typed async client and the channel adapter."""

from channels.zalo._channel import WEBHOOK_PATH, ZaloChannel, ZaloSettings, content_text
from channels.zalo._client import ZaloBotClient
from channels.zalo._errors import (
    ZaloError,
    ZaloNetworkError,
    ZaloPollIdle,
    ZaloServerError,
    ZaloTokenInvalid,
    translate_zalo_errors,
)
from channels.zalo._types import (
    BotInfo,
    SentMessage,
    WebhookInfo,
    ZaloEvent,
    ZaloMessage,
    ZaloUpdate,
    ZaloUser,
    parse_update,
    parse_updates,
)

__all__ = [
    "WEBHOOK_PATH",
    "BotInfo",
    "SentMessage",
    "WebhookInfo",
    "ZaloBotClient",
    "ZaloChannel",
    "ZaloError",
    "ZaloEvent",
    "ZaloMessage",
    "ZaloNetworkError",
    "ZaloPollIdle",
    "ZaloServerError",
    "ZaloSettings",
    "ZaloTokenInvalid",
    "ZaloUpdate",
    "ZaloUser",
    "content_text",
    "parse_update",
    "parse_updates",
    "translate_zalo_errors",
]
