"""Zalo end to end: fake Zalo Bot API (real HTTP) → Loopgate → fake LLM → fake Zalo.

Every test drives the real adapter, gateway, scheduler, loop and delivery; assertions are on what
the fake Zalo server received. Waits are on conditions, never fixed sleeps.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.http.server import create_app
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, delay, error, text
from tests.fakes.zalo_server import DEFAULT_TOKEN, FakeZalo, event, image_event, text_event
from tests.image_support import jpeg
from tests.waiting import wait_until

TOKEN = DEFAULT_TOKEN  # the fixture's fake server (tests/zalo_support.py)
SECRET = "webhook-secret-123"
HOOK = "http://loopgate.test/zalo/webhook"


def zalo_config(
    tmp_path: Path,
    llm: FakeLLM,
    zalo: FakeZalo,
    *,
    bot: dict[str, Any] | None = None,
    **overrides: Any,
) -> Any:
    section: dict[str, Any] = {
        "enabled": True,
        "token": TOKEN,
        "api_base_url": zalo.base_url,
        "mode": "polling",
        "polling_timeout": 1,
        "backoff_initial": 0.02,
        "backoff_max": 0.5,
        **overrides,
    }
    return make_config(tmp_path, llm, channels={"zalo": section}, bot=bot or {})


until = wait_until


async def settle(zalo: FakeZalo, rounds: int = 2) -> None:
    """Let ``rounds`` more getUpdates round trips pass: anything in flight has landed by then."""
    polls = len(zalo.calls("getUpdates"))
    await zalo.wait_for(lambda: len(zalo.calls("getUpdates")) >= polls + rounds)


def user_texts(llm: FakeLLM) -> list[str]:
    return [r.messages[-1]["content"] for r in llm.chat_requests]


@pytest.fixture
async def polling(tmp_path: Path, llm: FakeLLM, zalo: FakeZalo) -> AsyncIterator[Loopgate]:
    async with Loopgate(zalo_config(tmp_path, llm, zalo)) as app:
        yield app


class TestPolling:
    @pytest.mark.parametrize("shape", ["object", "list"])
    async def test_dm_round_trip_in_both_shapes(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo, shape: str
    ) -> None:
        zalo.updates_shape = shape  # type: ignore[assignment]
        llm.script(text("Chào Lan!"), text("Second answer"))
        zalo.push(text_event("xin chào", chat_id="u1"), text_event("again", chat_id="u2"))
        async with Loopgate(zalo_config(tmp_path, llm, zalo)) as app:
            await zalo.wait_for(lambda: len(zalo.messages) == 2)
            assert sorted(zalo.texts()) == ["Chào Lan!", "Second answer"]
            assert sorted(m.json["chat_id"] for m in zalo.messages) == ["u1", "u2"]
            assert sorted(user_texts(llm)) == ["again", "xin chào"]
            assert app.gateway.channels["zalo"].capabilities.reactions is False
        # The model was told to write plain text for Zalo.
        system = llm.chat_requests[0].json["messages"][0]["content"]
        assert "Zalo shows plain text only" in system
        # getUpdates was asked with the configured long-poll timeout; polling started from
        # a clean state (no webhook, so nothing was deleted).
        assert zalo.calls("getUpdates")[0].json == {"timeout": "1"}
        assert zalo.calls("getWebhookInfo") and not zalo.calls("deleteWebhook")

    async def test_idle_polls_are_normal(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        with capture_logs() as logs:
            await zalo.wait_for(lambda: len([c for c in zalo.calls("getUpdates")]) >= 3)
            assert all(c.status == 408 for c in zalo.calls("getUpdates"))
            zalo.push(text_event("still there?", chat_id="u1"))
            await zalo.wait_for(lambda: zalo.messages)
        assert zalo.texts() == ["echo: still there?"]
        assert not [e for e in logs if e["log_level"] in ("warning", "error")]

    async def test_errors_back_off_then_recover(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        await zalo.wait_for(lambda: zalo.calls("getUpdates"))
        zalo.fail("getUpdates", 502, times=3)
        zalo.push(text_event("after the outage", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        assert zalo.texts() == ["echo: after the outage"]
        calls = zalo.calls("getUpdates")
        failed = [i for i, c in enumerate(calls) if c.status == 502]
        assert len(failed) == 3
        # Each retry waited at least the doubling backoff: 0.02, 0.04, 0.08 s.
        gaps = [calls[i + 1].at - calls[i].at for i in failed]
        for n, gap in enumerate(gaps):
            assert gap >= 0.02 * 2**n * 0.9

    async def test_token_error_is_logged_and_not_spun(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        zalo.invalid_token = True
        with capture_logs() as logs:
            async with Loopgate(zalo_config(tmp_path, llm, zalo, backoff_initial=0.05)):
                await zalo.wait_for(lambda: len(zalo.calls("getWebhookInfo")) >= 4, timeout=10)
        bad = [e for e in logs if e["event"] == "zalo.token_invalid"]
        assert bad and all(e["log_level"] == "error" for e in bad)
        assert "channels.zalo.token" in bad[-1]["fix"]
        assert not any(TOKEN in str(e) for e in logs)
        calls = zalo.calls("getWebhookInfo")
        gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
        # Doubling, not spinning: 0.05, 0.1, 0.2 s at least.
        for n, gap in enumerate(gaps[:3]):
            assert gap >= 0.05 * 2**n * 0.9
        assert not zalo.calls("getUpdates") and llm.chat_requests == []

    async def test_existing_webhook_is_removed_for_polling(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        zalo.webhook["url"] = "https://old.example.com/hook"
        zalo.push(text_event("hi", chat_id="u1"))
        async with Loopgate(zalo_config(tmp_path, llm, zalo)):
            await zalo.wait_for(lambda: zalo.messages)
        assert len(zalo.calls("deleteWebhook")) == 1

    async def test_redelivered_message_is_processed_once_across_restart(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        first = text_event("only once", chat_id="u1", message_id="m-42")
        zalo.push(first)
        async with Loopgate(zalo_config(tmp_path, llm, zalo)):
            await zalo.wait_for(lambda: zalo.messages)
            zalo.push(first)  # redelivered while running
            await zalo.wait_for(lambda: zalo.pending_updates == 0)
        # Restart on the same database: Zalo has no offset, so it may deliver it again.
        zalo.push(first, text_event("new one", chat_id="u1"))
        async with Loopgate(zalo_config(tmp_path, llm, zalo)):
            await zalo.wait_for(lambda: len(zalo.messages) == 2)
        assert user_texts(llm) == ["only once", "new one"]
        assert zalo.texts() == ["echo: only once", "echo: new one"]


class TestNormalization:
    async def test_unsupported_content_becomes_notes(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        # A photo is fetched and shown to the model (test_zalo_photos.py); one whose link
        # can't be used stays a note.
        # Each note its own turn: with the default queue_mode (collect), those arriving during
        # the first answer would be one turn.
        config = zalo_config(tmp_path, llm, zalo, bot={"queue_mode": "followup"})
        async with Loopgate(config):
            zalo.push(
                image_event("", caption="what is this?", chat_id="u1"),
                event("message.unsupported.received", chat_id="u1"),
                event("message.sticker.received", chat_id="u1", sticker="s1", url="https://st/1"),
                event("message.location.received", chat_id="u1"),
            )
            await zalo.wait_for(lambda: len(zalo.messages) == 4)
            image, unsupported, sticker, unknown = user_texts(llm)
            assert image == ("[The user sent an image. You can't see images here.]\nwhat is this?")
            assert "does not share with bots" in unsupported
            assert "sticker" in sticker
            assert "location" in unknown

    async def test_group_needs_a_mention(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        group = {"chat_id": "g1", "chat_type": "GROUP"}
        zalo.push(
            text_event("chatting among ourselves", sender_id="u1", **group),
            text_event("@bot.loopgate what time is it?", sender_id="u2", **group),
        )
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        assert user_texts(llm) == ["what time is it?"]
        assert zalo.texts("g1") == ["echo: what time is it?"]
        history = llm.chat_requests[0].json["messages"][0]["content"]
        assert "a group chat" in history

    async def test_group_addressed_only_delivery(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        zalo.push(text_event("hello bot", chat_id="g1", sender_id="u1", chat_type="GROUP"))
        config = zalo_config(tmp_path, llm, zalo, group_delivery="addressed_only")
        async with Loopgate(config):
            await zalo.wait_for(lambda: zalo.messages)
        assert zalo.texts("g1") == ["echo: hello bot"]


class TestReplies:
    async def test_markdown_becomes_plain_text_in_2000_char_chunks(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        paragraphs = [f"Paragraph {i}. " + "lorem ipsum " * 45 for i in range(12)]
        answer = (
            "**Hello** see [the docs](https://example.com/docs)\n\n"
            "- first\n- second\n\n```\ncode line\n```\n\n" + "\n\n".join(paragraphs)
        )
        llm.script(text(answer))
        zalo.push(text_event("write a lot", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        chunks = zalo.texts("u1")
        assert len(chunks) > 2
        assert all(1 <= len(c) <= 2000 for c in chunks)
        first = chunks[0]
        assert first.startswith("Hello see the docs (https://example.com/docs)")
        assert "• first" in first and "• second" in first
        assert "code line" in first and "```" not in first and "**" not in first
        # Split on paragraph boundaries: every paragraph arrives whole, in one chunk.
        for p in paragraphs:
            assert sum(p.strip() in c for c in chunks) == 1

    async def test_typing_refreshed_while_running_and_stopped_before_reply(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        llm.script(delay(0.6, text("done")))
        zalo.push(text_event("slow one", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        typing = zalo.calls("sendChatAction")
        assert len(typing) >= 3  # typing_interval is 0.05 s in tests
        assert {(c.json["chat_id"], c.json["action"]) for c in typing} == {("u1", "typing")}
        assert max(c.at for c in typing) < zalo.messages[0].at
        assert zalo.texts() == ["done"]

    async def test_typing_stops_on_no_reply_and_error(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        # One chat, so the two runs are sequential and take the script in order.
        llm.script(text("NO_REPLY"), error(400, "bad model"))
        zalo.push(text_event("ok", chat_id="u1"), text_event("boom", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0 and len(llm.chat_requests) == 2)
        # NO_REPLY sent nothing; the failed run sent the short apology only.
        assert zalo.texts() == ["Sorry, something went wrong while answering. Please try again."]
        await settle(zalo)
        count = len(zalo.calls("sendChatAction"))
        assert count >= 2  # shown for both runs
        await settle(zalo)
        assert len(zalo.calls("sendChatAction")) == count  # and never again once they ended

    async def test_send_retries_on_429_and_503_without_double_send(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        zalo.fail("sendMessage", 429, retry_after=0.02)
        zalo.fail("sendMessage", 503)
        zalo.push(text_event("hi", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        assert [c.status for c in zalo.calls("sendMessage")] == [429, 503, 200]
        assert zalo.texts() == ["echo: hi"]

    async def test_500_after_delivery_is_not_resent(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        zalo.fail("sendMessage", 500, delivered=True)
        zalo.push(text_event("hi", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        await settle(zalo)
        assert len(zalo.calls("sendMessage")) == 1
        assert zalo.texts() == ["echo: hi"]


class TestStop:
    async def test_stop_in_a_dm(self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo) -> None:
        llm.script(delay(30, text("too late")))
        zalo.push(text_event("long task", chat_id="u1"))
        await until(lambda: polling.registry.active_runs == 1 and llm.chat_requests)
        zalo.push(text_event("/stop", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        assert zalo.texts() == ["Stopped."]
        # "Stopped." may race the last refresh of the cancelled run; after it, typing is over.
        await settle(zalo)
        count = len(zalo.calls("sendChatAction"))
        assert count >= 1
        await settle(zalo)
        assert len(zalo.calls("sendChatAction")) == count

    async def test_stopall_cancels_and_drops_the_queue(
        self, polling: Loopgate, llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        llm.script(delay(30, text("a")), text("b"))
        zalo.updates_shape = "list"
        zalo.push(text_event("one", chat_id="u1"), text_event("two", chat_id="u1"))
        await until(lambda: polling.registry.active_runs == 1 and llm.chat_requests)
        zalo.push(text_event("/stopall", chat_id="u1"))
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: polling.registry.active_runs == 0)
        await settle(zalo)
        assert zalo.texts() == ["Stopped."]
        assert len(llm.chat_requests) == 1  # "two" never ran

    async def test_group_permissions(self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo) -> None:
        group = {"chat_id": "g1", "chat_type": "GROUP"}
        llm.script(delay(30, text("x")))
        config = zalo_config(tmp_path, llm, zalo, admins=["boss"])
        async with Loopgate(config) as app:
            zalo.push(text_event("@bot.loopgate long task", sender_id="alice", **group))
            await until(lambda: app.registry.active_runs == 1)
            zalo.push(text_event("/stop", sender_id="mallory", **group))
            await zalo.wait_for(lambda: zalo.messages)
            assert zalo.texts() == ["Only the person who asked or an admin can stop this."]
            assert app.registry.active_runs == 1
            zalo.push(text_event("@bot.loopgate /stop", sender_id="boss", **group))
            await zalo.wait_for(lambda: len(zalo.messages) == 2)
            await until(lambda: app.registry.active_runs == 0)
            assert zalo.texts()[-1] == "Stopped."


class TestWebhook:
    @pytest.fixture
    async def hooked(
        self, tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
    ) -> AsyncIterator[tuple[Loopgate, httpx.ASGITransport]]:
        config = zalo_config(
            tmp_path,
            llm,
            zalo,
            mode="webhook",
            webhook_url="https://bot.example.com/zalo/webhook",
            webhook_secret=SECRET,
        )
        async with Loopgate(config) as app:
            transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
            await zalo.wait_for(lambda: zalo.calls("setWebhook"))
            yield app, transport

    async def test_set_webhook_on_start_and_no_polling(
        self, hooked: tuple[Loopgate, httpx.ASGITransport], zalo: FakeZalo
    ) -> None:
        assert zalo.calls("setWebhook")[0].json == {
            "url": "https://bot.example.com/zalo/webhook",
            "secret_token": SECRET,
        }
        assert not zalo.calls("getUpdates")

    @pytest.mark.parametrize("secret", [None, "", "wrong-secret-xyz", SECRET + "x"])
    async def test_bad_secret_is_401_and_never_processed(
        self,
        hooked: tuple[Loopgate, httpx.ASGITransport],
        llm: FakeLLM,
        zalo: FakeZalo,
        secret: str | None,
    ) -> None:
        _, transport = hooked
        bad = text_event("sneaky", chat_id="u1", message_id="m-bad")
        response = await zalo.post_webhook(HOOK, bad, secret=secret, transport=transport)
        assert response.status_code == 401
        # The same message with the right secret is still new: the bad one left no trace.
        good = await zalo.post_webhook(HOOK, bad, secret=SECRET, transport=transport)
        assert good.status_code == 200
        await zalo.wait_for(lambda: zalo.messages)
        assert user_texts(llm) == ["sneaky"] and zalo.texts() == ["echo: sneaky"]

    @pytest.mark.parametrize("wrapped", [False, True])
    async def test_ack_at_once_then_process_in_background(
        self,
        hooked: tuple[Loopgate, httpx.ASGITransport],
        llm: FakeLLM,
        zalo: FakeZalo,
        wrapped: bool,
    ) -> None:
        app, transport = hooked
        llm.script(delay(30, text("slow")))
        payload: dict[str, Any] = text_event("take your time", chat_id="u1")
        if wrapped:  # the documented webhook body wraps the event in {ok, result}
            payload = {"ok": True, "result": payload}
        response = await zalo.post_webhook(HOOK, payload, secret=SECRET, transport=transport)
        assert response.status_code == 200 and response.json() == {"ok": True}
        assert zalo.messages == []  # acknowledged before the answer exists
        await until(lambda: app.registry.active_runs == 1)
        stop = text_event("/stop", chat_id="u1")
        await zalo.post_webhook(HOOK, stop, secret=SECRET, transport=transport)
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: app.registry.active_runs == 0)
        assert zalo.texts() == ["Stopped."]

    async def test_redelivery_is_processed_once(
        self, hooked: tuple[Loopgate, httpx.ASGITransport], llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        app, transport = hooked
        payload = text_event("once", chat_id="u1", message_id="m-7")
        for _ in range(3):
            r = await zalo.post_webhook(HOOK, payload, secret=SECRET, transport=transport)
            assert r.status_code == 200
        await zalo.wait_for(lambda: zalo.messages)
        await until(lambda: app.registry.active_runs == 0)
        follow = text_event("next", chat_id="u1")
        await zalo.post_webhook(HOOK, follow, secret=SECRET, transport=transport)
        await zalo.wait_for(lambda: len(zalo.messages) == 2)
        assert user_texts(llm) == ["once", "next"]

    async def test_image_via_webhook(
        self, hooked: tuple[Loopgate, httpx.ASGITransport], llm: FakeLLM, zalo: FakeZalo
    ) -> None:
        _, transport = hooked
        payload = image_event(zalo.add_photo(jpeg(30, 20)), caption="and?", chat_id="u1")
        await zalo.post_webhook(HOOK, payload, secret=SECRET, transport=transport)
        await zalo.wait_for(lambda: zalo.messages)
        assert [p["type"] for p in llm.last_request.json["messages"][-1]["content"]] == [
            "text",
            "image_url",
        ]

    async def test_polling_mode_has_no_webhook_route(
        self, polling: Loopgate, zalo: FakeZalo
    ) -> None:
        transport = httpx.ASGITransport(app=create_app(polling, manage_lifespan=False))
        payload = text_event("x", chat_id="u1")
        response = await zalo.post_webhook(HOOK, payload, secret=SECRET, transport=transport)
        assert response.status_code == 404
