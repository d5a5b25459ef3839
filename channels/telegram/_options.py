"""The Telegram adapter's settings (the bot maps ``channels.telegram.*`` onto these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from channels.telegram._ratelimit import RateLimits


@dataclass(frozen=True, slots=True)
class TelegramOptions:
    """The adapter's settings (the bot maps ``channels.telegram.*`` onto these)."""

    token: str
    api_base_url: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    webhook_secret: str = ""
    allowed_updates: tuple[str, ...] = ("message",)
    polling_timeout: int = 30
    """Seconds one ``getUpdates`` long poll waits for updates."""
    rate_limits: RateLimits | None = field(default_factory=RateLimits)
    """``None`` turns pacing off (self-hosted Bot API servers, benchmarks)."""
    reactions: bool = True
    drafts: bool = True
    """Stream answers in private chats as draft previews (``sendMessageDraft``); off, or where
    Telegram refuses drafts, the bot streams by sending a message and editing it."""
    reply_context_chars: int = 500
    retry_backoff: float = 0.5
    """First delay before retrying a 5xx/network failure; doubles each time."""
    name: str = "telegram"
