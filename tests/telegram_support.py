"""Shared pieces of the Telegram end-to-end tests: the fake Bot API fixture and config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.app import Loopgate
from bot.config import Config
from bot.storage.models import SessionRow
from channels.telegram import TelegramChannel
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram

GROUP = -100777


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def tg_config(
    tmp_path: Path,
    llm: FakeLLM,
    tg: FakeTelegram,
    bot: dict[str, Any] | None = None,
    **section: Any,
) -> Config:
    return make_config(
        tmp_path, llm, channels={"telegram": telegram_section(tg, **section)}, bot=bot or {}
    )


def telegram_section(tg: FakeTelegram, **overrides: Any) -> dict[str, Any]:
    """``channels.telegram`` pointed at the fake: polling, no pacing, whole messages."""
    return {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "polling_timeout": 1,
        "rate_limit": "off",
        # Whole-message delivery; streamed answers (the default) are tested on their own
        # (test_streaming_e2e.py, test_telegram_streaming.py).
        "streaming": "off",
        **overrides,
    }


def channel_of(app: Loopgate) -> TelegramChannel:
    channel = app.gateway.channels["telegram"]
    assert isinstance(channel, TelegramChannel)
    return channel


def user_messages(llm: FakeLLM) -> list[str]:
    return [
        r.json["messages"][-1]["content"]
        for r in llm.chat_requests
        if r.json["messages"][-1]["role"] == "user"
    ]


def reactions(tg: FakeTelegram, message_id: int) -> list[str]:
    return [
        (c.params.get("reaction") or [{"emoji": ""}])[0]["emoji"]
        for c in tg.calls_of("setMessageReaction")
        if c.params["message_id"] == message_id
    ]


async def session_keys(app: Loopgate) -> list[str]:
    return await app.db.run_read(lambda conn: list(conn.execute(select(SessionRow.key)).scalars()))
