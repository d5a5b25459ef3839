"""Helpers shared by the bot/storage test modules: a run appended with fixed usage."""

from __future__ import annotations

from typing import Any

from agent_core.messages import Message, Usage
from bot.storage import SqlSessionStore

USAGE = Usage(input_tokens=10, output_tokens=5)


async def _append(store: SqlSessionStore, key: str, *messages: Message, **kw: Any) -> None:
    await store.append_run(
        key, list(messages), run_id="run-1", usage=USAGE, model="m1", provider="p1", **kw
    )
