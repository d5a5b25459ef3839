"""channels/slack/_status.py: the assistant thread status ("is thinking…"), shown on typing
refreshes and cleared on a run's terminal reaction, its reaction removed, a reply, or its ttl.

Against the fake Slack with the real ``slack_sdk`` client; the fake accepts
``assistant.threads.setStatus`` in DMs only (an assistant thread), like Slack.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack._status import ThreadStatus, thread_key
from channels.types import ChatRef, ChatType
from tests.fakes.slack_events import next_ts
from tests.fakes.slack_server import FakeSlack
from tests.waiting import wait_until

METHOD = "assistant.threads.setStatus"


class Spawner:
    """The channel's task spawner: keeps the tasks so a test can wait for them."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []

    def __call__(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self.tasks.append(task)
        return task

    async def finish(self, name: str) -> None:
        """Wait for every task of that name started so far (done, failed or cancelled)."""
        await asyncio.gather(
            *(t for t in self.tasks if t.get_name() == name), return_exceptions=True
        )


@pytest.fixture
async def spawner() -> AsyncIterator[Spawner]:
    spawner = Spawner()
    yield spawner
    for task in spawner.tasks:
        task.cancel()
    await asyncio.gather(*spawner.tasks, return_exceptions=True)


def statuses(
    slack: FakeSlack, spawner: Spawner, *, ttl: float = 30.0, enabled: bool = True
) -> ThreadStatus:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url, timeout=5)
    return ThreadStatus(
        client, spawner, enabled=enabled, thinking="is thinking…", tool="is using {tool}…", ttl=ttl
    )


def dm_thread(channel: str = "D1") -> ChatRef:
    return ChatRef("slack", channel, ChatType.DIRECT, next_ts())


def shown(slack: FakeSlack, chat: ChatRef) -> str | None:
    assert chat.thread_id is not None
    return slack.statuses.get((chat.chat_id, chat.thread_id))


def test_thread_key() -> None:
    assert thread_key(ChatRef("slack", "D1", ChatType.DIRECT, "1.5")) == ("D1", "1.5")
    assert thread_key(ChatRef("slack", "D1", ChatType.DIRECT)) is None


class TestRefresh:
    async def test_shows_thinking_in_a_thread(self, slack: FakeSlack, spawner: Spawner) -> None:
        chat = dm_thread()
        await statuses(slack, spawner).refresh(chat)
        assert shown(slack, chat) == "is thinking…"
        [call] = slack.calls_of(METHOD)
        assert call.args["channel_id"] == "D1" and call.args["thread_ts"] == chat.thread_id

    async def test_nothing_outside_a_thread_or_when_disabled(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        await statuses(slack, spawner).refresh(ChatRef("slack", "D1", ChatType.DIRECT))
        await statuses(slack, spawner, enabled=False).refresh(dm_thread())
        assert not slack.calls_of(METHOD)

    async def test_a_refused_thread_is_not_asked_again(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        not_assistant = ChatRef("slack", "C1", ChatType.GROUP, next_ts())
        await status.refresh(not_assistant)
        await status.refresh(not_assistant)
        assert len(slack.calls_of(METHOD)) == 1
        chat = dm_thread()
        await status.refresh(chat)  # other threads still are
        assert shown(slack, chat) == "is thinking…"

    @pytest.mark.parametrize("error", ["missing_scope", "not_allowed_token_type", "unknown_method"])
    async def test_an_app_wide_refusal_stops_asking_anywhere(
        self, slack: FakeSlack, spawner: Spawner, error: str
    ) -> None:
        status = statuses(slack, spawner)
        slack.fail(METHOD, error=error)
        await status.refresh(dm_thread())
        await status.refresh(dm_thread("D2"))
        assert len(slack.calls_of(METHOD)) == 1
        assert status.disabled

    async def test_a_status_nothing_refreshes_expires(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        chat = dm_thread()
        await statuses(slack, spawner, ttl=0.05).refresh(chat)
        await wait_until(lambda: shown(slack, chat) == "", what="status cleared by its ttl")
        assert [s for _, _, s in slack.status_log] == ["is thinking…", ""]

    async def test_a_refresh_keeps_the_progress_text(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.show_progress(chat, "read_file")
        await spawner.finish("slack:status-text")
        await status.refresh(chat)
        assert [s for _, _, s in slack.status_log] == ["is thinking…", *["is using read_file…"] * 2]


class TestProgress:
    @pytest.mark.parametrize(
        ("tool", "helpers", "text"),
        [
            ("grep", 0, "is using grep…"),
            ("grep", 1, "is waiting for 1 helper…"),
            (None, 3, "is waiting for 3 helpers…"),
        ],
    )
    async def test_the_text_follows_the_run(
        self, slack: FakeSlack, spawner: Spawner, tool: str | None, helpers: int, text: str
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.show_progress(chat, tool, helpers=helpers)
        await spawner.finish("slack:status-text")
        assert shown(slack, chat) == text

    async def test_back_to_thinking_and_the_same_text_is_not_sent_again(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        for tool in ("grep", "grep", None):
            status.show_progress(chat, tool)
            await spawner.finish("slack:status-text")
        assert [s for _, _, s in slack.status_log] == [
            "is thinking…",
            "is using grep…",
            "is thinking…",
        ]

    async def test_no_progress_where_no_status_is_shown(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        status.show_progress(dm_thread(), "grep")
        await spawner.finish("slack:status-text")
        assert not spawner.tasks and not slack.calls_of(METHOD)


class TestClearing:
    async def test_a_terminal_reaction_clears(self, slack: FakeSlack, spawner: Spawner) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.reaction_added(chat, "✅")
        await spawner.finish("slack:status-clear")
        assert shown(slack, chat) == ""

    async def test_a_removed_reaction_clears_after_the_grace(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.reaction_removed(chat)
        await spawner.finish("slack:status-clear")
        assert shown(slack, chat) == ""

    async def test_a_new_reaction_within_the_grace_keeps_the_status(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.reaction_removed(chat)
        status.reaction_added(chat, "🤔")
        await spawner.finish("slack:status-clear")
        assert all(t.cancelled() for t in spawner.tasks if t.get_name() == "slack:status-clear")
        assert shown(slack, chat) == "is thinking…"
        assert len(slack.calls_of(METHOD)) == 1

    async def test_after_a_reply_nothing_is_cleared(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        assert chat.thread_id is not None
        status.replied(chat.chat_id, chat.thread_id)
        status.reaction_removed(chat)
        status.reaction_added(chat, "✅")
        await spawner.finish("slack:status-clear")
        await status.clear(chat.chat_id, chat.thread_id)
        assert len(slack.calls_of(METHOD)) == 1  # Slack cleared it on the reply

    async def test_clear_now(self, slack: FakeSlack, spawner: Spawner) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        assert chat.thread_id is not None
        await status.clear(chat.chat_id, chat.thread_id)
        assert shown(slack, chat) == ""
        await status.clear(chat.chat_id, chat.thread_id)  # nothing shown: no call
        assert len(slack.calls_of(METHOD)) == 2

    async def test_a_cleared_thread_starts_again_with_thinking(
        self, slack: FakeSlack, spawner: Spawner
    ) -> None:
        status = statuses(slack, spawner)
        chat = dm_thread()
        await status.refresh(chat)
        status.show_progress(chat, "grep")
        await spawner.finish("slack:status-text")
        assert chat.thread_id is not None
        await status.clear(chat.chat_id, chat.thread_id)
        await status.refresh(chat)
        assert shown(slack, chat) == "is thinking…"

    async def test_close_cancels_the_timers(self, slack: FakeSlack, spawner: Spawner) -> None:
        status = statuses(slack, spawner, ttl=0.05)
        chat = dm_thread()
        await status.refresh(chat)
        status.reaction_removed(chat)
        status.close()
        await asyncio.gather(*spawner.tasks, return_exceptions=True)
        assert spawner.tasks and all(t.cancelled() for t in spawner.tasks)
        assert shown(slack, chat) == "is thinking…"
