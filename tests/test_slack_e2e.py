"""Slack end to end: fake Slack (real HTTP + WebSocket) → slack-bolt → gateway → fake LLM → Slack.

Every test that makes sense in both transports runs in both: ``http`` posts signed Events API
requests to the bot's own Starlette app, ``socket`` pushes Socket Mode envelopes from the fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from bot.app import Loopgate
from bot.server import create_app
from channels import Forbidden
from channels.slack import SlackChannel
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, call, delay, error, text, tool_calls
from tests.fakes.slack_server import (
    EventSender,
    FakeSlack,
    app_mention_event,
    event_callback,
    message_event,
    next_ts,
)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def slack_section(slack: FakeSlack, mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "mode": mode,
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "signing_secret": slack.signing_secret,
        "api_base_url": slack.base_url,
        "ping_interval": 0.5,
        **extra,
    }


@dataclass
class Bot:
    """A started Loopgate with Slack, and a way to deliver events in its transport."""

    app: Loopgate
    slack: FakeSlack
    mode: str
    http: httpx.AsyncClient
    sender: EventSender
    acked: list[str] = field(default_factory=list)

    @property
    def channel(self) -> SlackChannel:
        channel = self.app.gateway.channels["slack"]
        assert isinstance(channel, SlackChannel)
        return channel

    async def deliver(self, payload: dict[str, Any], **kw: Any) -> None:
        """Deliver one event_callback and wait until Slack would consider it acknowledged."""
        if self.mode == "http":
            response = await self.sender.send(payload, **kw)
            assert response.status_code == 200, response.text
        else:
            envelope = await self.slack.push(payload)
            await self.slack.wait_for(lambda: envelope in self.slack.acks)
            self.acked.append(envelope)

    async def event(self, event: dict[str, Any], **kw: Any) -> None:
        await self.deliver(event_callback(event), **kw)

    async def settle(self, timeout: float = 10) -> None:
        """Wait until no run is active or queued and the adapter's tasks are done."""

        async def idle() -> None:
            while (
                self.app.registry.active_runs
                or self.app.gateway.scheduler.lanes
                or any(
                    t.get_name() in ("slack:event", "slack:command") for t in self.channel._tasks
                )
            ):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(idle(), timeout)

    async def close(self) -> None:
        """Stop the bot once the runs still finishing (a cancelled one, say) are done: a run
        cancelled by shutdown in the middle of a database write can leak its connection."""
        with contextlib.suppress(TimeoutError):
            await self.settle(timeout=5)
        await self.http.aclose()
        await self.app.aclose()


async def start_bot(
    tmp_path: Path,
    llm: FakeLLM,
    slack: FakeSlack,
    mode: str,
    bot: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[Loopgate, httpx.AsyncClient]:
    config = make_config(
        tmp_path, llm, channels={"slack": slack_section(slack, mode, **extra)}, bot=bot or {}
    )
    app = Loopgate(config)
    await app.start()
    transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
    return app, httpx.AsyncClient(transport=transport, base_url="http://loopgate")


@pytest.fixture(params=["http", "socket"])
async def bot(
    request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> AsyncIterator[Bot]:
    mode: str = request.param
    app, http = await start_bot(tmp_path, llm, slack, mode)
    if mode == "socket":
        await slack.wait_for(lambda: slack.socket_connections >= 1)
    bot = Bot(app, slack, mode, http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()


@pytest.fixture(params=["http", "socket"])
async def progress_bot(
    request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> AsyncIterator[Bot]:
    """Typing refreshed every 10 s: the status backstop (3 intervals) can't hide a missing
    cleanup within a test's 10 s wait."""
    mode: str = request.param
    app, http = await start_bot(tmp_path, llm, slack, mode, bot={"typing_interval": 10})
    if mode == "socket":
        await slack.wait_for(lambda: slack.socket_connections >= 1)
    bot = Bot(app, slack, mode, http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()


@pytest.fixture
async def http_bot(tmp_path: Path, llm: FakeLLM, slack: FakeSlack) -> AsyncIterator[Bot]:
    app, http = await start_bot(tmp_path, llm, slack, "http")
    bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
    try:
        yield bot
    finally:
        await bot.close()


class TestHttpVerification:
    async def test_url_verification_is_answered(self, http_bot: Bot) -> None:
        response = await http_bot.sender.send(
            {"type": "url_verification", "token": "t", "challenge": "ch-123"}
        )
        assert response.status_code == 200
        assert "ch-123" in response.text

    @pytest.mark.parametrize(
        "how", [{"secret": "wrong-secret"}, {"timestamp": int(time.time()) - 6 * 60}]
    )
    async def test_forged_or_stale_events_are_rejected(
        self, http_bot: Bot, llm: FakeLLM, slack: FakeSlack, how: dict[str, Any]
    ) -> None:
        response = await http_bot.sender.send(
            event_callback(message_event("hi", channel="D1")), **how
        )
        assert response.status_code == 401
        # A genuine event afterwards is answered, and it is the only one that was.
        await http_bot.event(message_event("real", channel="D1"))
        await slack.wait_for(lambda: slack.posts)
        await http_bot.settle()
        assert [p.text for p in slack.posts] == ["echo: real"]
        assert len(llm.chat_requests) == 1

    async def test_unsigned_request_is_rejected(self, http_bot: Bot, slack: FakeSlack) -> None:
        response = await http_bot.http.post(
            "/slack/events", json=event_callback(message_event("hi", channel="D1"))
        )
        assert response.status_code == 401

    async def test_ack_is_immediate_while_the_run_is_slow(
        self, http_bot: Bot, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        llm.script(delay(3.0, text("late")))
        started = time.monotonic()
        await http_bot.event(message_event("hi", channel="D1"))
        assert time.monotonic() - started < 1.0  # acked long before the answer exists
        assert not slack.posts
        await slack.wait_for(lambda: slack.posts, timeout=10)
        assert slack.posts[0].text == "late"


class TestConversation:
    async def test_dm_is_answered_inline(self, bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        event = message_event("hello there", channel="D1")
        await bot.event(event)
        await slack.wait_for(lambda: slack.posts)
        post = slack.posts[0]
        assert (post.channel, post.text, post.thread_ts) == ("D1", "echo: hello there", None)
        assert llm.chat_requests[0].messages[-1]["content"] == "hello there"
        # 👀 as "eyes" on the message while working, removed at the end.
        await slack.wait_for(lambda: ("remove", "D1", event["ts"], "eyes") in slack.reaction_log)
        assert ("add", "D1", event["ts"], "eyes") in slack.reaction_log
        assert not slack.reactions.get(("D1", event["ts"]))

    async def test_channel_mention_is_answered_in_its_thread(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        event = message_event("<@UBOT> what's up?", channel="C1")
        await bot.event(event)
        await slack.wait_for(lambda: slack.posts)
        post = slack.posts[0]
        assert (post.channel, post.thread_ts) == ("C1", event["ts"])
        # The bot's own mention is not part of what the model reads.
        assert llm.chat_requests[0].messages[-1]["content"] == "what's up?"
        assert post.text == "echo: what's up?"

    async def test_follow_up_in_the_thread_needs_no_mention_and_shares_the_session(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        first = message_event("<@UBOT> remember 42", channel="C1")
        await bot.event(first)
        await slack.wait_for(lambda: slack.posts)
        slack.add_thread("C1", [{"ts": first["ts"], "user": "UALICE", "text": first["text"]}])
        follow_up = message_event("and now?", channel="C1", thread_ts=first["ts"])
        await bot.event(follow_up)
        await slack.wait_for(lambda: len(slack.posts) == 2)
        assert slack.posts[1].thread_ts == first["ts"]
        # Same session: the second request carries the first exchange as history.
        contents = [m["content"] for m in llm.chat_requests[1].messages]
        assert "remember 42" in contents and contents[-1] == "and now?"

    async def test_channel_message_without_mention_is_ignored(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        await bot.event(message_event("just chatting", channel="C1"))
        # Someone else's thread the bot never joined: still not addressed.
        parent = message_event("topic", channel="C1", user="UBOB")
        slack.add_thread("C1", [parent])
        await bot.event(message_event("reply", channel="C1", thread_ts=parent["ts"]))
        await bot.event(message_event("<@UBOT> ping", channel="C1"))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()
        assert [p.text for p in slack.posts] == ["echo: ping"]
        assert len(llm.chat_requests) == 1

    async def test_reply_in_a_thread_the_bot_joined_is_addressed_with_parent_context(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        parent = message_event("<@UBOT> earlier question", channel="C2", user="UBOB")
        slack.add_thread("C2", [parent])
        await bot.event(message_event("and this?", channel="C2", thread_ts=parent["ts"]))
        await slack.wait_for(lambda: slack.posts)
        assert slack.posts[0].thread_ts == parent["ts"]
        replies = slack.calls_of("conversations.replies")
        assert replies and replies[0].args["ts"] == parent["ts"]

    async def test_mention_in_a_new_thread_gives_the_model_its_parent(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        parent = message_event("Deploy failed with exit code 137", channel="C3", user="UBOB")
        slack.add_thread("C3", [parent])
        await bot.event(
            message_event("<@UBOT> what does that mean?", channel="C3", thread_ts=parent["ts"])
        )
        await slack.wait_for(lambda: slack.posts)
        sent = llm.chat_requests[0].messages[-1]["content"]
        assert sent.startswith('[In a thread that starts with: "Deploy failed with exit code 137"]')
        assert sent.endswith("what does that mean?")

    async def test_bots_and_own_messages_and_edits_are_ignored(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        await bot.event(message_event("<@UBOT> hi from a bot", channel="D1", bot_id="BOTHER"))
        await bot.event(message_event("my own words", channel="D1", user="UBOT"))
        bot_post = message_event("x", channel="D1", subtype="bot_message", bot_id="B2")
        del bot_post["user"]  # bot_message events carry no user
        await bot.event(bot_post)
        await bot.event(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": "D1",
                "channel_type": "im",
                "ts": next_ts(),
                "message": {"type": "message", "user": "UALICE", "text": "edited"},
            }
        )
        await bot.event(message_event("real one", channel="D1"))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()
        assert [p.text for p in slack.posts] == ["echo: real one"]
        assert len(llm.chat_requests) == 1

    async def test_file_share_becomes_a_clear_note(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        files = [{"id": "F1", "name": "report.pdf", "mimetype": "application/pdf"}]
        await bot.event(
            message_event("see attached", channel="D1", subtype="file_share", files=files)
        )
        await slack.wait_for(lambda: slack.posts)
        sent = llm.chat_requests[0].messages[-1]["content"]
        assert sent.startswith("see attached\n")
        assert "report.pdf (application/pdf)" in sent and "can't be read" in sent


class TestReplyInThreadOff:
    async def test_channel_answers_go_top_level(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        app, http = await start_bot(tmp_path, llm, slack, "http", reply_in_thread=False)
        try:
            bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
            await bot.event(message_event("<@UBOT> one", channel="C1"))
            await slack.wait_for(lambda: slack.posts)
            await bot.event(message_event("<@UBOT> two", channel="C1"))
            await slack.wait_for(lambda: len(slack.posts) == 2)
            assert [(p.channel, p.thread_ts) for p in slack.posts] == [("C1", None)] * 2
            # Without threads the channel is one conversation: "one" is history for "two".
            contents = [m["content"] for m in llm.chat_requests[1].messages]
            assert "one" in contents and contents[-1] == "two"
        finally:
            await http.aclose()
            await app.aclose()


class TestExactlyOnce:
    async def test_retries_and_message_mention_pair_make_one_run_and_one_reply(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        message = message_event("<@UBOT> once please", channel="C1")
        payload = event_callback(message, event_id="EvONE")
        await bot.deliver(payload)
        if bot.mode == "http":
            await bot.deliver(payload, retry_num=1)
        else:
            await bot.deliver(payload)  # Socket Mode redelivers the same event_id
        await bot.deliver(event_callback(app_mention_event(message), event_id="EvTWO"))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()
        assert len(llm.chat_requests) == 1
        assert [p.text for p in slack.posts] == ["echo: once please"]

    async def test_dedupe_survives_a_restart(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        payload = event_callback(message_event("hi", channel="D1"), event_id="EvRESTART")
        for _ in range(2):
            app, http = await start_bot(tmp_path, llm, slack, "http")
            bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
            try:
                await bot.deliver(payload, retry_num=None)
                await slack.wait_for(lambda: slack.posts)
                await bot.settle()
            finally:
                await http.aclose()
                await app.aclose()
        assert len(slack.posts) == 1 and len(llm.chat_requests) == 1


class TestFormatting:
    async def test_markdown_becomes_mrkdwn_and_slack_tokens_survive(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        llm.script(
            text(
                "**Done**, _really_ ~~not~~ <@U123> in <#C9> <!here>: a & b < c "
                "[docs](https://example.com)\n\n```\ncode <x>\n```"
            )
        )
        await bot.event(message_event("format", channel="D1"))
        await slack.wait_for(lambda: slack.posts)
        out = slack.posts[0].text
        assert "*Done*" in out and "_really_" in out and "~not~" in out
        assert "<@U123>" in out and "<#C9>" in out and "<!here>" in out
        assert "a &amp; b &lt; c" in out
        assert "<https://example.com|docs>" in out
        assert "```\ncode &lt;x&gt;\n```" in out

    async def test_long_answer_is_chunked_within_4000_in_the_thread(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        paragraphs = [f"Paragraph {i}: " + "word " * 300 for i in range(10)]
        llm.script(text("\n\n".join(paragraphs)))
        event = message_event("<@UBOT> long", channel="C1")
        await bot.event(event)
        await bot.settle()
        assert len(slack.posts) > 1
        assert all(len(p.text) <= 4000 for p in slack.posts)
        assert all(p.thread_ts == event["ts"] for p in slack.posts)
        joined = "".join("".join(p.text for p in slack.posts).split())
        assert joined == "".join("".join(paragraphs).split())


class TestProgress:
    """Assistant status ("is thinking…") and the eyes reaction, cleaned up whatever happens."""

    async def _run(
        self, progress_bot: Bot, slack: FakeSlack, text_in: str = "hi"
    ) -> dict[str, Any]:
        thread = next_ts()
        event = message_event(text_in, channel="D7", thread_ts=thread)
        slack.add_thread("D7", [{"ts": thread, "user": "UALICE", "text": "assistant thread"}])
        await progress_bot.event(event)
        return event

    async def _assert_clean(self, slack: FakeSlack, event: dict[str, Any]) -> None:
        key = ("D7", event["thread_ts"])
        await slack.wait_for(lambda: slack.statuses.get(key) == "")
        await slack.wait_for(lambda: not slack.reactions.get(("D7", event["ts"])))
        assert ("D7", event["thread_ts"], "is thinking…") in slack.status_log
        assert ("add", "D7", event["ts"], "eyes") in slack.reaction_log

    async def test_success(self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        llm.script(delay(0.3, text("answer")))
        event = await self._run(progress_bot, slack)
        await slack.wait_for(lambda: slack.posts)
        assert slack.posts[0].thread_ts == event["thread_ts"]
        await self._assert_clean(slack, event)

    async def test_no_reply(self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        llm.script(delay(0.3, text("NO_REPLY")))
        event = await self._run(progress_bot, slack)
        await self._assert_clean(slack, event)
        await progress_bot.settle()
        assert slack.posts == []

    async def test_error(self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        llm.script(delay(0.3, error(400, "bad request")))
        event = await self._run(progress_bot, slack)
        await slack.wait_for(lambda: slack.posts)
        assert "something went wrong" in slack.posts[0].text
        await self._assert_clean(slack, event)

    async def test_cancel(self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        llm.script(delay(5.0, text("too late")))
        event = await self._run(progress_bot, slack)
        await slack.wait_for(lambda: slack.statuses.get(("D7", event["thread_ts"])))
        await progress_bot.event(message_event("/stop", channel="D7", thread_ts=event["thread_ts"]))
        await slack.wait_for(lambda: [p.text for p in slack.posts] == ["Stopped."])
        await self._assert_clean(slack, event)

    async def test_status_names_the_tool_in_use_then_thinks_again(
        self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        llm.script(delay(0.3, tool_calls(call("list_files"))), delay(0.6, text("found nothing")))
        event = await self._run(progress_bot, slack)
        await slack.wait_for(lambda: slack.posts)
        texts = [t for (c, ts, t) in slack.status_log if (c, ts) == ("D7", event["thread_ts"])]
        assert "is using list_files…" in texts
        after_tool = texts[texts.index("is using list_files…") + 1 :]
        assert "is thinking…" in after_tool  # the second model call shows thinking again
        await self._assert_clean(slack, event)

    async def test_backstop_clears_the_status_when_reactions_are_off(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        # Without reactions there is no end-of-run signal: the status expires on its own once
        # typing refreshes stop (3 x 0.5 s here).
        app, http = await start_bot(
            tmp_path, llm, slack, "http", bot={"typing_interval": 0.5, "reactions": False}
        )
        try:
            bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
            llm.script(delay(0.3, text("NO_REPLY")))
            event = await self._run(bot, slack)
            key = ("D7", event["thread_ts"])
            await slack.wait_for(lambda: slack.statuses.get(key) == "is thinking…")
            await slack.wait_for(lambda: slack.statuses.get(key) == "")
            assert not slack.reaction_log and not slack.posts
        finally:
            await http.aclose()
            await app.aclose()

    async def test_status_is_not_retried_where_slack_refuses_it(
        self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        llm.script(delay(0.5, text("ok")))
        await progress_bot.event(
            message_event("<@UBOT> hi", channel="C1")
        )  # not an assistant thread
        await slack.wait_for(lambda: slack.posts)
        assert len(slack.calls_of("assistant.threads.setStatus")) == 1


class TestStop:
    async def test_stop_needs_requester_or_admin(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        slack.users["UADMIN"] = {"is_admin": True}
        llm.script(delay(5.0, text("never")), delay(5.0, text("never either")))
        first = message_event("<@UBOT> long job", channel="C1", user="UALICE")
        await bot.event(first)
        await slack.wait_for(lambda: ("add", "C1", first["ts"], "eyes") in slack.reaction_log)
        await slack.wait_for(lambda: bot.app.registry.active_runs == 1)
        # Bob may not stop Alice's run (in her thread).
        await bot.event(message_event("/stop", channel="C1", user="UBOB", thread_ts=first["ts"]))
        await slack.wait_for(lambda: slack.posts)
        assert slack.posts[0].text.startswith("Only the person who asked")
        assert slack.posts[0].thread_ts == first["ts"]
        # Alice's top-level /stop reaches the run in her latest thread.
        await bot.event(message_event("/stop", channel="C1", user="UALICE"))
        await slack.wait_for(lambda: len(slack.posts) == 2)
        assert (slack.posts[1].text, slack.posts[1].thread_ts) == ("Stopped.", first["ts"])
        # A second run, stopped by a workspace admin with /stopall in the thread.
        second = message_event("<@UBOT> another", channel="C1", user="UALICE")
        await bot.event(second)
        await slack.wait_for(lambda: bot.app.registry.active_runs == 1)
        await bot.event(
            message_event("/stopall", channel="C1", user="UADMIN", thread_ts=second["ts"])
        )
        await slack.wait_for(lambda: len(slack.posts) == 3)
        assert slack.posts[2].text == "Stopped."
        await bot.settle()
        assert [p.text for p in slack.posts][-1] == "Stopped."

    async def test_slash_command_stop(self, http_bot: Bot, slack: FakeSlack, llm: FakeLLM) -> None:
        llm.script(delay(5.0, text("never")))
        await http_bot.event(message_event("work", channel="D3", user="UALICE"))
        await slack.wait_for(lambda: http_bot.app.registry.active_runs == 1)
        response = await http_bot.sender.send_command("/stop", user="UALICE", channel="D3")
        assert response.status_code == 200
        await slack.wait_for(lambda: slack.posts)
        assert (slack.posts[0].channel, slack.posts[0].text) == ("D3", "Stopped.")
        await http_bot.settle()
        assert http_bot.app.registry.active_runs == 0

    async def test_slash_command_stop_over_socket_mode(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        if bot.mode != "socket":
            pytest.skip("the HTTP variant is test_slash_command_stop")
        llm.script(delay(5.0, text("never")))
        await bot.event(message_event("work", channel="D4", user="UALICE"))
        await slack.wait_for(lambda: bot.app.registry.active_runs == 1)
        command = {"command": "/stop", "text": "", "user_id": "UALICE", "channel_id": "D4"}
        envelope = await slack.push(command | {"trigger_id": "t-1"}, kind="slash_commands")
        await slack.wait_for(lambda: envelope in slack.acks)
        await slack.wait_for(lambda: slack.posts)
        assert (slack.posts[0].channel, slack.posts[0].text) == ("D4", "Stopped.")


class TestRateLimits:
    async def test_429_retry_after_is_honoured_without_double_post(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        slack.fail("chat.postMessage", status=429, retry_after=1)
        await bot.event(message_event("hi", channel="D1"))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()
        attempts = slack.calls_of("chat.postMessage")
        assert len(attempts) == 2 and len(slack.posts) == 1
        assert attempts[1].at - attempts[0].at >= 1.0
        # A 429 is a refusal: nothing to look for before posting again.
        assert not slack.calls_of("conversations.history")

    async def test_transient_5xx_is_retried_once(
        self, bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        slack.fail("chat.postMessage", status=503)
        await bot.event(message_event("hi", channel="D1"))
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()
        assert len(slack.calls_of("chat.postMessage")) == 2
        assert [p.text for p in slack.posts] == ["echo: hi"]

    async def test_posts_are_paced_per_channel(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        app, http = await start_bot(
            tmp_path, llm, slack, "http", rate_limit={"per_second": 5, "burst": 2}
        )
        try:
            paragraphs = [f"P{i} " + "word " * 700 for i in range(5)]  # 5 chunks of ~3.5k
            llm.script(text("\n\n".join(paragraphs)))
            bot = Bot(app, slack, "http", http, EventSender(http, slack.signing_secret))
            await bot.event(message_event("long", channel="D1"))
            await slack.wait_for(lambda: len(slack.posts) == 5)
            at = [c.at for c in slack.calls_of("chat.postMessage")]
            # 2 at once, then one every 0.2 s: the last leaves >= 0.6 s after the first.
            assert at[-1] - at[0] >= 0.55
        finally:
            await http.aclose()
            await app.aclose()


@dataclass(frozen=True)
class Place:
    """Where a question is asked, where its answer goes and how the bot looks for it there."""

    event: dict[str, Any]
    channel: str
    thread_ts: str | None
    lookup: str

    @classmethod
    def make(cls, where: str) -> Place:
        if where == "dm":
            return cls(message_event("hi", channel="D1"), "D1", None, "conversations.history")
        event = message_event("<@UBOT> hi", channel="C1")
        return cls(event, "C1", event["ts"], "conversations.replies")


@pytest.fixture(params=["dm", "thread"])
def place(request: pytest.FixtureRequest) -> Place:
    return Place.make(request.param)


class TestPostRetries:
    """A 5xx or a timeout doesn't say whether Slack posted: the bot looks before posting again."""

    async def _ask(self, bot: Bot, slack: FakeSlack, place: Place) -> None:
        await bot.event(place.event)
        await slack.wait_for(lambda: slack.posts)
        await bot.settle()  # the run (and any retry of its post) is over
        assert [(p.channel, p.text, p.thread_ts) for p in slack.posts] == [
            (place.channel, "echo: hi", place.thread_ts)
        ]

    async def test_500_after_posting_is_not_posted_again(
        self, bot: Bot, slack: FakeSlack, place: Place
    ) -> None:
        slack.fail("chat.postMessage", status=500, after_posting=True)
        await self._ask(bot, slack, place)
        (attempt,) = slack.calls_of("chat.postMessage")
        (lookup,) = slack.calls_of(place.lookup)
        assert lookup.at > attempt.at
        assert float(lookup.args["oldest"]) < float(slack.posts[0].ts)
        # Delivered, so the run ends as a success: 👀 removed, no error reply.
        await slack.wait_for(lambda: not slack.reactions.get((place.channel, place.event["ts"])))

    async def test_500_without_posting_is_posted_again_once(
        self, bot: Bot, slack: FakeSlack, place: Place
    ) -> None:
        slack.fail("chat.postMessage", status=500)
        await self._ask(bot, slack, place)
        first, second = slack.calls_of("chat.postMessage")
        (lookup,) = slack.calls_of(place.lookup)
        assert first.at < lookup.at < second.at

    async def test_post_then_timeout_is_not_posted_again(
        self, bot: Bot, slack: FakeSlack, place: Place
    ) -> None:
        bot.channel.client.timeout = 1  # Slack's answer takes 30 s, far past the client's patience
        slack.hang("chat.postMessage", 30)
        await self._ask(bot, slack, place)
        assert len(slack.calls_of("chat.postMessage")) == 1
        assert len(slack.calls_of(place.lookup)) == 1

    async def test_429_in_a_thread_waits_and_posts_once(self, bot: Bot, slack: FakeSlack) -> None:
        place = Place.make("thread")
        slack.fail("chat.postMessage", status=429, retry_after=1)
        await self._ask(bot, slack, place)
        first, second = slack.calls_of("chat.postMessage")
        assert second.at - first.at >= 1.0
        assert not slack.calls_of(place.lookup)


class TestSocketMode:
    async def test_reconnects_after_the_socket_drops(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        app, http = await start_bot(tmp_path, llm, slack, "socket", ping_interval=0.2)
        try:
            await slack.wait_for(lambda: slack.socket_connections == 1)
            await slack.drop_socket()
            await slack.wait_for(lambda: slack.socket_connections == 2, timeout=15)
            assert len(slack.calls_of("apps.connections.open")) >= 2
            bot = Bot(app, slack, "socket", http, EventSender(http, slack.signing_secret))
            await bot.event(message_event("after reconnect", channel="D1"))
            await slack.wait_for(lambda: slack.posts)
            assert slack.posts[0].text == "echo: after reconnect"
        finally:
            await http.aclose()
            await app.aclose()


class TestAuthFailures:
    @pytest.mark.parametrize("mode", ["http", "socket"])
    async def test_invalid_bot_token_fails_fast(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack, mode: str
    ) -> None:
        section = slack_section(slack, mode, bot_token="xoxb-wrong")
        app = Loopgate(make_config(tmp_path, llm, channels={"slack": section}))
        with (
            structlog.testing.capture_logs() as logs,
            pytest.raises(Forbidden, match="invalid_auth"),
        ):
            await asyncio.wait_for(app.start(), 5)
        await app.aclose()
        assert any(e["event"] == "slack.auth_failed" and e["error"] == "invalid_auth" for e in logs)

    async def test_invalid_app_token_fails_fast(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        section = slack_section(slack, "socket", app_token="xapp-wrong")
        app = Loopgate(make_config(tmp_path, llm, channels={"slack": section}))
        with structlog.testing.capture_logs() as logs, pytest.raises(Forbidden, match="app_token"):
            await asyncio.wait_for(app.start(), 5)
        await app.aclose()
        assert len(slack.calls_of("apps.connections.open")) == 1  # no retry loop
        assert any(e["event"] == "slack.socket_auth_failed" for e in logs)

    async def test_token_revoked_while_running_stops_reconnecting(
        self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack
    ) -> None:
        app, http = await start_bot(tmp_path, llm, slack, "socket", ping_interval=0.2)
        try:
            await slack.wait_for(lambda: slack.socket_connections == 1)
            slack.revoke()
            await slack.drop_socket()
            channel = app.gateway.channels["slack"]
            assert isinstance(channel, SlackChannel) and channel.socket is not None
            socket = channel.socket
            await slack.wait_for(lambda: socket.fatal_error == "token_revoked", timeout=10)
            opened = len(slack.calls_of("apps.connections.open"))
            await asyncio.sleep(1.0)  # a retry loop would call again within ping intervals
            assert len(slack.calls_of("apps.connections.open")) == opened
        finally:
            await http.aclose()
            await app.aclose()
