"""Wiring the Zalo channel from ``channels.zalo`` config."""

from __future__ import annotations

from bot.config import Config
from bot.platforms import PlatformDeps
from channels import Channel
from channels.zalo import ZaloBotClient, ZaloChannel, ZaloSettings


def build_zalo(config: Config, deps: PlatformDeps) -> Channel:
    zalo = config.channels.zalo
    client = ZaloBotClient(
        zalo.token,
        base_url=zalo.api_base_url,
        request_timeout=zalo.request_timeout,
        attempts=zalo.send_attempts,
        backoff_initial=zalo.backoff_initial,
        backoff_max=zalo.backoff_max,
    )
    settings = ZaloSettings(
        mode=zalo.mode,
        webhook_url=zalo.webhook_url,
        webhook_secret=zalo.webhook_secret,
        poll_timeout=zalo.polling_timeout,
        backoff_initial=zalo.backoff_initial,
        backoff_max=zalo.backoff_max,
        group_delivery=zalo.group_delivery,
        mention_names=tuple(zalo.mention_names),
    )
    gate = deps.gate_for("zalo", zalo.token, zalo.mode)
    return ZaloChannel(client, settings, deps.seen, poll_gate=gate)
