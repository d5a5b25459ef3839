"""Telegram end to end, the answering side: /stop, typing and reactions, delivery (formatting,
chunking, rate limits and errors)."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from bot.app import Loopgate
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import (
    GROUP,
    reactions,
    tg_config,
)


class TestStop:
    async def test_stop_permissions_in_groups(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        tg.admins[GROUP] = {43}
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            llm.script(delay(30, text("never delivered")))
            ask = "@loopgate_bot think hard"
            asked = tg.group_message(ask, user_id=42, entities=tg.mention(ask))
            tg.push(asked)
            await tg.wait_for(lambda: llm.chat_requests)
            tg.push(tg.group_message("/stop@loopgate_bot", user_id=44, first_name="Bob"))
            await tg.wait_for(lambda: len(tg.sent) == 1)
            assert tg.sent[0]["text"] == "Only the person who asked or an admin can stop this."
            tg.push(tg.group_message("/stop@loopgate_bot", user_id=43, first_name="Carol"))
            await tg.wait_for(lambda: len(tg.sent) == 2)
            assert tg.sent[1]["text"] == "Stopped."
            message_id = asked["message"]["message_id"]
            await tg.wait_for(lambda: reactions(tg, message_id)[-1:] == [""])
            tg.push(tg.group_message("/stopall", user_id=42))
            await tg.wait_for(lambda: len(tg.sent) == 3)
        assert tg.sent[2]["text"] == "Nothing to stop."
        assert "never delivered" not in tg.texts()
        assert tg.calls_of("getChatAdministrators")
        # Typing ended with the cancelled run, before its cleanup cleared the reaction.
        cleared_at = [
            c.at
            for c in tg.calls_of("setMessageReaction")
            if c.params["message_id"] == message_id and not c.params.get("reaction")
        ][-1]
        assert all(c.at <= cleared_at for c in tg.calls_of("sendChatAction"))


class TestTypingAndReactions:
    async def test_typing_refreshes_and_ttl_bounds_it(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        bot = {"typing_interval": 0.05, "typing_ttl": 0.3, "reaction_cleanup": "final"}
        async with Loopgate(tg_config(tmp_path, llm, tg, bot=bot)):
            llm.script(delay(1.2, text("ok")))
            update = tg.private_message("slow please")
            tg.push(update)
            await tg.wait_for(lambda: tg.sent)
            message_id = update["message"]["message_id"]
            await tg.wait_for(lambda: reactions(tg, message_id)[-1:] == ["👍"])
        typing = tg.calls_of("sendChatAction")
        assert len(typing) >= 2  # sent at once, then refreshed
        assert len(typing) <= 10  # 0.3 s TTL at 0.05 s: not the ~24 of a 1.2 s run
        assert reactions(tg, message_id)[0] == "👀"


class TestDelivery:
    async def test_html_formatting_chunking_and_plain_fallback(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        long = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(14))
        llm.script(
            text("**bold** <tag> & `a<b`\n\n```python\nx = 1 < 2\n```"),
            text(long),
            text("**fallback** & <more>"),
        )
        tg.fail_next(
            "sendMessage",
            400,
            "Bad Request: can't parse entities: Unsupported start tag",
            match=lambda p: "fallback" in p.get("text", "") and p.get("parse_mode") == "HTML",
        )
        async with Loopgate(tg_config(tmp_path, llm, tg, group_policy="open")):
            tg.push(tg.group_message("format"))
            await tg.wait_for(lambda: tg.sent)
            tg.push(tg.group_message("long"))
            await tg.wait_for(lambda: len(tg.sent) >= 4)
            tg.push(tg.group_message("fallback"))
            await tg.wait_for(lambda: "fallback" in tg.sent[-1]["text"])
        formatted = tg.sent[0]["text"]
        assert formatted.startswith("<b>bold</b> &lt;tag&gt; &amp; <code>a&lt;b</code>")
        assert '<pre><code class="language-python">x = 1 &lt; 2' in formatted
        chunks = [p for p in tg.sent[1:-1]]
        assert len(chunks) >= 3
        assert all(len(p["text"]) <= 4096 for p in chunks)
        assert "reply_parameters" in chunks[0]
        assert all("reply_parameters" not in p for p in chunks[1:])
        assert " ".join(p["text"] for p in chunks).split() == long.split()
        # Telegram refused the HTML: the same answer arrived as plain text, once.
        assert tg.sent[-1]["text"] == "fallback & <more>"
        assert "parse_mode" not in tg.sent[-1]
        assert sum("fallback" in p["text"] for p in tg.sent) == 1

    async def test_too_long_in_utf16_is_resplit(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        llm.script(text("😀" * 3000))  # 3000 characters, 6000 UTF-16 units
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("emoji"))
            await tg.wait_for(lambda: len(tg.sent) >= 2)
        assert "".join(tg.texts()) == "😀" * 3000
        assert len(tg.calls_of("sendMessage")) == len(tg.sent) + 1  # one refusal, then pieces

    async def test_429_retry_after_is_honoured_once(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 429, retry_after=1)
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("hi"))
            await tg.wait_for(lambda: tg.sent)
        refused, accepted = tg.calls_of("sendMessage")
        assert accepted.at - refused.at >= 0.95
        assert tg.texts() == ["echo: hi"]

    async def test_5xx_retried_403_not(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        tg.fail_next("sendMessage", 502)
        async with Loopgate(tg_config(tmp_path, llm, tg)):
            tg.push(tg.private_message("one"))
            await tg.wait_for(lambda: tg.sent)
            tg.fail_next("sendMessage", 403)
            with capture_logs() as logs:
                tg.push(tg.private_message("two", user_id=55))
                await tg.wait_for(lambda: len(tg.calls_of("sendMessage")) == 3)
                # 👀 and its clearing for both messages: the failed turn has cleaned up.
                await tg.wait_for(lambda: len(tg.calls_of("setMessageReaction")) == 4)
        assert tg.texts() == ["echo: one"]
        assert [c.params["chat_id"] for c in tg.calls_of("sendMessage")] == [42, 42, 55]
        assert any(e["event"] == "telegram.forbidden" for e in logs)

    async def test_group_migration_follows_new_chat_id(
        self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
    ) -> None:
        tg.fail_next(
            "sendMessage",
            400,
            "Bad Request: group chat was upgraded to a supergroup chat",
            migrate_to_chat_id=-1009999,
        )
        old = {"id": -555, "type": "group", "title": "Old"}
        async with Loopgate(tg_config(tmp_path, llm, tg, group_policy="open")):
            tg.push(tg.message("hi all", chat=old))
            await tg.wait_for(lambda: tg.sent)
            tg.push(tg.message("again", chat=old))
            await tg.wait_for(lambda: len(tg.sent) == 2)
        assert [p["chat_id"] for p in tg.sent] == [-1009999, -1009999]
