"""Telegram end to end: the real python-telegram-bot against a fake Bot API over real HTTP,
through the whole bot (gateway, access policy, scheduler, turn, delivery)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import yaml
from structlog.testing import capture_logs

from bot.app import Loopgate
from bot.cli import main as cli_main
from bot.http.server import create_app
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import (
    GROUP,
    reactions,
    session_keys,
    tg_config,
    user_messages,
)
from tests.waiting import wait_until


class TestPolling:
    async def test_dm_round_trip_typing_reactions_and_commands(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            update = tg.private_message("hello there")
            message_id = update["message"]["message_id"]
            tg.push(update)
            await tg.wait_for(lambda: tg.sent)
            await tg.wait_for(lambda: reactions(tg, message_id)[-1:] == [""])

        assert tg.sent[0]["text"] == "echo: hello there"
        assert tg.sent[0]["chat_id"] == 42
        assert tg.sent[0]["parse_mode"] == "HTML"
        assert "reply_parameters" not in tg.sent[0]  # DMs don't quote
        assert user_messages(llm) == ["hello there"]
        # 👀 on receipt, cleared at the end (default cleanup: clear).
        assert reactions(tg, message_id)[0] == "👀"
        assert reactions(tg, message_id)[-1] == ""
        # Typing at once, stopped before the message went out, never restarted.
        typing = tg.calls_of("sendChatAction")
        sent_at = tg.calls_of("sendMessage")[0].at
        assert typing and all(c.params["action"] == "typing" for c in typing)
        assert all(c.at < sent_at for c in typing)
        commands = tg.calls_of("setMyCommands")[0].params["commands"]
        assert [c["command"] for c in commands] == ["stop", "stopall", "reset", "help"]
        assert tg.calls_of("deleteWebhook")  # polling needs no webhook set

    async def test_offset_survives_restart_without_replay(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        config = tg_config(tmp_path, llm, tg)
        async with Loopgate(config):
            first = tg.push(tg.private_message("first"))
            await tg.wait_for(lambda: tg.texts() == ["echo: first"])
        # Telegram keeps unconfirmed updates: the fake does too, until an offset confirms them.
        polls_before = len(tg.calls_of("getUpdates"))
        second = tg.push(tg.private_message("second"))
        async with Loopgate(config):
            await tg.wait_for(lambda: len(tg.texts()) == 2)
            # Let the poller confirm the second update, then check nothing else is answered.
            await tg.wait_for(
                lambda: any(c.params.get("offset") == second + 1 for c in tg.calls_of("getUpdates"))
            )
        resumed = tg.calls_of("getUpdates")[polls_before]
        assert resumed.params["offset"] == first + 1
        assert tg.texts() == ["echo: first", "echo: second"]
        assert user_messages(llm) == ["first", "second"]

    async def test_media_without_caption_becomes_a_note(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        # Voice is not fetched yet (photos are: test_telegram_media.py): it stays a note.
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(
                tg.private_message(
                    None, voice={"file_id": "v", "file_unique_id": "v", "duration": 3}
                )
            )
            await tg.wait_for(lambda: len(tg.sent) == 1)
        (first,) = user_messages(llm)
        assert first.startswith("[The user sent a voice message;")


class TestWebhook:
    async def test_secret_ack_before_the_run_and_duplicates(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        config = tg_config(
            tmp_path,
            llm,
            tg,
            mode="webhook",
            webhook_url="https://bot.example/telegram/webhook",
            webhook_secret="s3cret",
            allowed_updates=["message", "edited_message"],
        )
        async with Loopgate(config) as app:
            assert tg.webhook is not None
            assert tg.webhook["url"] == "https://bot.example/telegram/webhook"
            assert tg.webhook["secret_token"] == "s3cret"
            assert tg.webhook["allowed_updates"] == ["message", "edited_message"]
            assert not tg.calls_of("getUpdates")

            transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
            async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:
                update = {"update_id": 5001, **tg.private_message("slow one")}
                bad = await http.post(
                    "/telegram/webhook",
                    json=update,
                    headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"},
                )
                missing = await http.post("/telegram/webhook", json=update)
                assert (bad.status_code, missing.status_code) == (401, 401)

                llm.script(delay(1.0, text("done slowly")))
                headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
                ok = await http.post("/telegram/webhook", json=update, headers=headers)
                # Acknowledged before the (slow) run could have answered.
                assert ok.status_code == 200
                assert tg.sent == []
                again = await http.post("/telegram/webhook", json=update, headers=headers)
                assert again.status_code == 200
                await tg.wait_for(lambda: tg.sent)
        # The rejected requests were never processed; the duplicate was processed once.
        assert tg.texts() == ["done slowly"]
        assert len(llm.chat_requests) == 1


class TestWebhooksDuringADrain:
    async def test_a_message_is_kept_for_the_next_process_and_a_stop_acts(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        config = tg_config(
            tmp_path,
            llm,
            tg,
            mode="webhook",
            webhook_url="https://bot.example/telegram/webhook",
            webhook_secret="s3cret",
        )
        headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
        llm.script(delay(600, text("never sent")))
        async with Loopgate(config) as app:
            transport = httpx.ASGITransport(app=create_app(app, manage_lifespan=False))
            async with httpx.AsyncClient(transport=transport, base_url="http://bot") as http:

                async def post(update_id: int, text: str, user_id: int) -> int:
                    message = tg.private_message(text, user_id=user_id)
                    update = {"update_id": update_id, **message}
                    response = await http.post("/telegram/webhook", json=update, headers=headers)
                    return response.status_code

                assert await post(6001, "a long job", 7) == 200
                # Until the model has the request, a /stop would leave the scripted delay for
                # the next process's run (a run is active before its first model call).
                await wait_until(lambda: app.registry.active_runs == 1 and llm.chat_requests)
                drain = asyncio.create_task(app.drain(grace=600))
                await wait_until(lambda: app.draining)
                # Taken (200), not refused with a 503 that Telegram would retry much later.
                assert await post(6002, "arrived during the drain", 8) == 200
                assert await post(6003, "/stop", 7) == 200
                assert await asyncio.wait_for(drain, 20) == 0  # the /stop ended the drain
                assert await post(6004, "after the drain", 9) == 503
        assert tg.texts(7) == ["Stopped."] and tg.texts(8) == []

        llm.script(text("answered by the next process"))
        async with Loopgate(config) as app:
            await tg.wait_for(lambda: tg.texts(8))
        assert tg.texts(8) == ["answered by the next process"]
        assert len(llm.chat_requests) == 2


class TestNormalizationAndGating:
    async def test_group_gating_mentions_topics_and_quotes(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        async with Loopgate(tg_config(tmp_path, llm, tg)) as app:
            with capture_logs() as logs:
                tg.push(tg.group_message("just chatting"))
                tg.push(tg.group_message("/help@otherbot"))
                mention = "@loopgate_bot what's up?"
                tg.push(tg.group_message(mention, entities=tg.mention(mention)))
                await tg.wait_for(lambda: len(tg.sent) == 1)
            skipped = [e for e in logs if e["event"] == "inbound.skipped"]
            assert [e["reason"] for e in skipped] == ["not_mentioned", "not_mentioned"]
            assert user_messages(llm) == ["what's up?"]  # the @handle is stripped
            first = tg.sent[0]
            assert first["chat_id"] == GROUP
            assert "message_thread_id" not in first
            assert "reply_parameters" in first  # groups quote the triggering message

            # A reply to the bot's message addresses it; the quoted text goes to the model.
            bot_message = {
                "message_id": first["_message_id"],
                "date": 0,
                "chat": {"id": GROUP, "type": "supergroup", "title": "Team"},
                "from": tg.bot_user(),
                "text": "x" * 900,
            }
            tg.push(tg.group_message("and then?", reply_to_message=bot_message))
            await tg.wait_for(lambda: len(tg.sent) == 2)
            quoted = user_messages(llm)[-1]
            assert quoted.startswith('[Replying to you (the assistant): "' + "x" * 400)
            assert '…"]\nand then?' in quoted
            assert len(quoted) < 600  # truncated

            # Forum topic: the thread id is in the session key and in the reply.
            root = {
                "message_id": 7,
                "date": 0,
                "chat": {"id": GROUP, "type": "supergroup", "is_forum": True},
                "from": tg.user(),
                "forum_topic_created": {"name": "Ops", "icon_color": 1},
            }
            topic_text = "@loopgate_bot status?"
            update = tg.group_message(
                topic_text,
                forum=True,
                entities=tg.mention(topic_text),
                message_thread_id=7,
                is_topic_message=True,
                reply_to_message=root,
            )
            tg.push(update)
            await tg.wait_for(lambda: len(tg.sent) == 3)
            assert tg.sent[2]["message_thread_id"] == 7
            assert tg.sent[2]["reply_parameters"]["message_id"] == update["message"]["message_id"]
            assert user_messages(llm)[-1] == "status?"  # the topic root is not a quote

            # Forwarded, with formatting entities turned into markdown.
            fwd = "@loopgate_bot look: important"
            tg.push(
                tg.group_message(
                    fwd,
                    entities=[*tg.mention(fwd), {"type": "bold", "offset": 20, "length": 9}],
                    forward_origin={
                        "type": "user",
                        "date": 0,
                        "sender_user": tg.user(5, "Bob"),
                    },
                )
            )
            await tg.wait_for(lambda: len(tg.sent) == 4)
            assert user_messages(llm)[-1] == "[Forwarded from Bob]\nlook: **important**"
            keys = await session_keys(app)
        assert "agent:main:telegram:group:-100777" in keys
        assert "agent:main:telegram:group:-100777:topic:7" in keys

    async def test_group_policy_open_and_disabled(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        async with Loopgate(tg_config(tmp_path, llm, tg, group_policy="open")):
            tg.push(tg.group_message("no mention needed"))
            await tg.wait_for(lambda: tg.sent)
        assert tg.texts() == ["echo: no mention needed"]

    async def test_pairing_flow_with_cli_approval(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        config = tg_config(tmp_path, llm, tg, dm_policy="pairing")
        config_file = tmp_path / "config.yaml"
        config_file.write_text(yaml.safe_dump({"database": {"url": config.database.url}}))
        async with Loopgate(config):
            tg.push(tg.private_message("let me in", user_id=77))
            await tg.wait_for(lambda: tg.sent)
            match = re.search(r"pairing code is ([A-Z2-9]{8})", tg.sent[0]["text"])
            assert match, tg.sent[0]["text"]
            code = match.group(1)
            assert not re.search(r"[01IO]", code)
            assert llm.chat_requests == []  # never reached the model

            wrong = ["pairing", "approve", "WRONG123", "--config", str(config_file)]
            assert await asyncio.to_thread(cli_main, wrong) == 1
            assert (
                await asyncio.to_thread(
                    cli_main, ["pairing", "approve", code.lower(), "--config", str(config_file)]
                )
                == 0
            )
            tg.push(tg.private_message("now?", user_id=77))
            await tg.wait_for(lambda: len(tg.sent) == 2)
        assert tg.sent[1]["text"] == "echo: now?"
