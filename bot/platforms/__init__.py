"""Building platform channels from config: one module per platform, each owning its wiring.

``build_platform_channels`` is called once at start-up; a platform module turns its config
section into a ready (not yet started) :class:`channels.Channel`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.config import Config
from channels import Channel, SeenStore, StateStore
from channels.protocol import PaceStore, PollGate


@dataclass(frozen=True, slots=True)
class PlatformDeps:
    """What the bot lends to adapters: persistence they can't import themselves."""

    state: StateStore
    seen: SeenStore
    poll_gate: Callable[[str, str], PollGate] | None = None
    """``(channel, token)`` → its poller election (bot/cluster); None: one process polls."""
    pace_store: Callable[[str, str], PaceStore] | None = None
    """``(channel, token)`` → the bot's send budgets shared by all processes (bot/cluster);
    None: each pacer keeps its buckets in memory."""

    def pacing_for(self, channel: str, token: str) -> PaceStore | None:
        return self.pace_store(channel, token) if self.pace_store else None

    def gate_for(self, channel: str, token: str, mode: str) -> PollGate | None:
        return self.poll_gate(channel, token) if self.poll_gate and mode == "polling" else None


def build_platform_channels(config: Config, deps: PlatformDeps) -> list[Channel]:
    channels: list[Channel] = []
    # Each platform is imported only when enabled, so an unused SDK costs nothing at start-up.
    if config.channels.telegram.enabled:
        from bot.platforms.telegram import build_telegram

        channels.append(build_telegram(config, deps))
    if config.channels.slack.enabled:
        from bot.platforms.slack import build_slack

        channels.append(build_slack(config, deps))
    if config.channels.zalo.enabled:
        from bot.platforms.zalo import build_zalo

        channels.append(build_zalo(config, deps))
    return channels
