"""The Slack adapter's settings (the bot maps ``channels.slack.*`` onto these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """What the adapter needs from ``channels.slack`` (the adapter can't import bot config)."""

    bot_token: str
    app_token: str = ""
    signing_secret: str = ""
    api_base_url: str = "https://slack.com/api/"
    mode: Literal["socket", "http"] = "socket"
    reply_in_thread: bool = True
    pace_per_second: float | None = 1.0
    """Sustained posts per second per channel; None turns pacing off."""
    pace_burst: int = 4
    assistant_status: bool = True
    thinking_status: str = "is thinking…"
    tool_status: str = "is using {tool}…"  # {tool}: the tool's name
    status_ttl: float = 15.0
    """Backstop: a status not refreshed for this long is cleared."""
    ping_interval: float = 10.0
    reconnect_backoff: float = 1.0
    api_retries: int = 2
    """Retries of a 429 (after Retry-After) or a 500/503; of a post only once it is known that
    the failed attempt did not land."""
    post_retry_backoff: float = 0.5
    """First wait before checking on (and maybe repeating) a post that failed with 5xx/timeout."""
    name: str = "slack"
