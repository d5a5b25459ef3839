"""Slack end to end, what the bot sends back: formatting, progress, /stop, rate limits, retries.

Long answers are chunked in the thread, the assistant status and reactions are cleaned up
whatever the run's outcome, posts are paced, and a post that may have landed despite a 5xx or a
timeout is not posted twice. Fixtures and the :class:`~tests.slack_support.Bot` driver are in
``tests/slack_support.py``; getting events in is ``test_slack_e2e.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLM, call, delay, error, text, tool_calls
from tests.fakes.slack_events import EventSender, message_event, next_ts
from tests.fakes.slack_server import FakeSlack
from tests.slack_support import Bot, start_bot


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

    async def test_status_counts_the_helpers_working(
        self, progress_bot: Bot, slack: FakeSlack, llm: FakeLLM
    ) -> None:
        llm.script(
            tool_calls(call("spawn", {"task": "a"}), call("spawn", {"task": "b"})),
            delay(0.3, text("both helpers are done")),
        )
        llm.route("/spawn/", delay(0.5, text("a done")), delay(0.5, text("b done")))
        event = await self._run(progress_bot, slack)
        await slack.wait_for(lambda: slack.posts)
        texts = [t for (c, ts, t) in slack.status_log if (c, ts) == ("D7", event["thread_ts"])]
        assert "is waiting for 2 helpers…" in texts
        assert slack.posts[-1].text == "both helpers are done"
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
