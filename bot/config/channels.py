"""The ``channels:`` section of config.yaml: one model per platform (Telegram, Slack, Zalo).

Every channel shares the access settings of :class:`_ChannelBase` (who may talk to the bot, and
where); the rest is what its adapter needs. :mod:`bot.config` re-exports these models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from bot.config.base import OffAllowed, StrictModel


class _ChannelBase(StrictModel):
    enabled: bool = False
    agent: str | None = None
    admins: list[str] = Field(default_factory=list)
    """User ids allowed to stop anyone's run in this channel's groups."""
    dm_policy: Literal["open", "allowlist", "pairing", "disabled"] = "open"
    group_policy: Literal["mention", "open", "allowlist", "disabled"] = "mention"
    """``mention``: answer in groups only when addressed (mention, reply to the bot, /cmd@bot)."""
    allow_from: list[str] = Field(default_factory=list)
    """User ids accepted in DMs under ``dm_policy: allowlist``."""
    group_allow_from: list[str] = Field(default_factory=list)
    """Chat ids (groups) accepted under ``group_policy: allowlist``."""

    def _require(self, channel: str, *fields: str) -> list[str]:
        if not self.enabled:
            return []
        return [
            f"channels.{channel}.{name}: field required (the channel is enabled)"
            for name in fields
            if not getattr(self, name)
        ]


class _StreamingOptions(StrictModel):
    """Streamed replies (``bot/pipeline/streaming/``): the answer grows in place while written."""

    streaming: Literal["off", "partial"] = "partial"
    """``partial``: show the answer while it is written; ``off``: send it whole when done."""
    stream_interval: float = Field(1.0, gt=0)
    """At most one preview update per this many seconds per chat (platform edit limits)."""
    block_replies: bool = True
    """Text the model writes between tool calls stays as a message of its own (else it is
    replaced by what comes next)."""
    stream_on_stop: Literal["mark", "delete"] = "mark"
    """``/stop`` during a stream: ``mark`` keeps the text shown so far and adds " (stopped)";
    ``delete`` removes the preview."""


class TelegramRateLimit(StrictModel):
    """Token buckets for message sends and edits (typing and reactions are not counted)."""

    per_chat: float = Field(1.0, gt=0)
    """Sustained messages per second in one chat."""
    per_chat_burst: int = Field(3, ge=1)
    """Messages allowed back to back in one chat before pacing starts."""
    per_group_per_minute: float = Field(20.0, gt=0)
    """Sustained messages per minute in one group (Telegram's documented group limit)."""
    per_group_burst: int = Field(5, ge=1)
    overall: float = Field(30.0, gt=0)
    """Sustained messages per second across all chats."""
    overall_burst: int = Field(30, ge=1)


class TelegramConfig(_ChannelBase, _StreamingOptions):
    token: str = ""
    api_base_url: str = "https://api.telegram.org"
    """Every call goes to ``{api_base_url}/bot{token}/{method}`` (self-hosted Bot API works)."""
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    """Public URL Telegram posts to; our server answers it at ``POST /telegram/webhook``."""
    webhook_secret: str = ""
    allowed_updates: list[str] = Field(default_factory=lambda: ["message"])
    """Update types requested from Telegram (``getUpdates`` and ``setWebhook``)."""
    polling_timeout: int = Field(30, ge=0, le=50)
    """Seconds one ``getUpdates`` long poll waits when there is nothing new."""
    rate_limit: Annotated[TelegramRateLimit | Literal["off"], OffAllowed] = Field(
        default_factory=lambda: TelegramRateLimit()
    )
    """Send pacing; ``off`` for self-hosted Bot API servers and benchmarks (429 still holds)."""
    reactions: bool = True
    """Status reactions in this channel (``bot.reactions`` must be on too)."""
    reply_context_chars: int = Field(500, ge=0)
    drafts: bool = True
    """Stream into private chats with ``sendMessageDraft``; false: send a message and edit it,
    as in groups."""
    """How much of a replied-to message the model sees (longer quotes are truncated)."""


class SlackRateLimit(StrictModel):
    per_second: float = Field(1.0, gt=0)
    """Sustained posts per second in one Slack channel (Slack allows about one)."""
    burst: int = Field(4, ge=1)
    """Posts allowed back to back before pacing starts, so a conversation is never delayed."""


class SlackConfig(_ChannelBase, _StreamingOptions):
    bot_token: str = ""
    app_token: str = ""
    signing_secret: str = ""
    api_base_url: str = "https://slack.com/api/"
    mode: Literal["socket", "http"] = "socket"
    reply_in_thread: bool = True
    """In channels, answer in the thread of the triggering message (DMs are always inline)."""
    rate_limit: Annotated[SlackRateLimit | Literal["off"], OffAllowed] = Field(
        default_factory=lambda: SlackRateLimit()
    )
    """Pacing of posts per Slack channel; ``off`` disables it (429 ``Retry-After`` still holds)."""
    assistant_status: bool = True
    """Show "is thinking…" with ``assistant.threads.setStatus`` where Slack allows it."""
    ping_interval: float = Field(10.0, gt=0)
    """Socket Mode: seconds between pings; a socket silent for 4 intervals is reconnected."""


class ZaloConfig(_ChannelBase):
    token: str = ""
    api_base_url: str = "https://bot-api.zaloplatforms.com"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    """Public HTTPS URL Zalo posts to; our server answers it at ``POST /zalo/webhook``."""
    webhook_secret: str = ""
    """8 to 256 characters; Zalo sends it back in ``X-Bot-Api-Secret-Token``."""
    polling_timeout: int = Field(30, ge=1, le=60)
    """Seconds one ``getUpdates`` long poll waits when there is nothing new."""
    request_timeout: float = Field(10.0, gt=0)
    """Seconds to wait for any other API call."""
    send_attempts: int = Field(3, ge=1, le=10)
    """Tries per API call when a retry is safe (429, 502/503/504, connect errors)."""
    backoff_initial: float = Field(1.0, gt=0)
    """First delay after a failed call or poll; doubles per consecutive failure."""
    backoff_max: float = Field(60.0, gt=0)
    """Longest delay between polls while the API keeps failing (e.g. a bad token)."""
    group_delivery: Literal["all", "addressed_only"] = "all"
    """``all``: Zalo sends every group message and the bot answers when @mentioned or replied
    to. ``addressed_only``: Zalo only sends messages addressed to the bot; each one counts."""
    mention_names: list[str] = Field(default_factory=list)
    """Extra names that address the bot as ``@name`` in groups (besides what ``getMe`` says)."""

    @field_validator("webhook_secret")
    @classmethod
    def _secret_length(cls, value: str) -> str:
        if value and not 8 <= len(value) <= 256:
            raise ValueError("must be 8 to 256 characters (a Zalo setWebhook rule)")
        return value


class ChannelsConfig(StrictModel):
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    zalo: ZaloConfig = Field(default_factory=ZaloConfig)

    def semantic_problems(self) -> list[str]:
        """Settings an enabled channel can't run without, which depend on its ``mode``."""
        problems = self.telegram._require("telegram", "token")
        if self.telegram.mode == "webhook":
            problems += self.telegram._require("telegram", "webhook_url", "webhook_secret")
        problems += self.slack._require("slack", "bot_token")
        problems += self.slack._require(
            "slack", "app_token" if self.slack.mode == "socket" else "signing_secret"
        )
        problems += self.zalo._require("zalo", "token")
        if self.zalo.mode == "webhook":
            problems += self.zalo._require("zalo", "webhook_url", "webhook_secret")
        return problems
