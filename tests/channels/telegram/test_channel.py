"""The Telegram adapter on its own against the fake Bot API: start-up, webhooks, the hand-over
of updates, chat actions and admins. Polling is test_polling.py; edits and drafts
test_drafts.py; sending test_sending.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from channels import Attachment, ChatRef, ChatType, FileFetcher, MessageRef, NotAccepted
from channels.errors import BadRequest, Forbidden
from channels.telegram import TelegramChannel, TelegramOptions
from channels.telegram._channel import COMMANDS, SECRET_HEADER
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import TELEGRAM_SECRET, Handler, MemorySeen, MemoryState, webhook_client

DM = ChatRef("telegram", "42", ChatType.DIRECT)
TEAM = ChatRef("telegram", "-100777", ChatType.GROUP)


def make(tg: FakeTelegram, *, seen: MemorySeen | None = None, **options: Any) -> TelegramChannel:
    settings: dict[str, Any] = {
        "token": tg.token,
        "api_base_url": tg.base_url,
        "mode": "webhook",
        "webhook_url": "https://bot.example/telegram/webhook",
        "webhook_secret": TELEGRAM_SECRET,
        "rate_limits": None,
        "retry_backoff": 0.01,
        **options,
    }
    return TelegramChannel(
        TelegramOptions(**settings),
        state=MemoryState(),
        seen=seen if seen is not None else MemorySeen(),
    )


@asynccontextmanager
async def started(
    tg: FakeTelegram, handler: Handler | None = None, **options: Any
) -> AsyncIterator[TelegramChannel]:
    channel = make(tg, **options)
    await channel.start(handler or Handler())
    try:
        yield channel
    finally:
        await channel.stop()


async def post(
    channel: TelegramChannel, payload: Any, *, secret: str | None = TELEGRAM_SECRET
) -> httpx.Response:
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    async with webhook_client(channel.webhook_path, channel.handle_webhook) as http:
        if isinstance(payload, bytes):
            return await http.post(channel.webhook_path, content=payload, headers=headers)
        return await http.post(channel.webhook_path, json=payload, headers=headers)


def update(tg: FakeTelegram, body: dict[str, Any]) -> dict[str, Any]:
    return {"update_id": tg.new_update_id(), **body}


class TestStart:
    async def test_start_learns_the_bot_registers_commands_and_sets_the_webhook(
        self, tg: FakeTelegram
    ) -> None:
        async with started(tg) as channel:
            assert channel.me is not None
            assert (channel.me.id, channel.me.username) == (tg.bot_id, tg.bot_username)
        [commands] = tg.calls_of("setMyCommands")
        assert [c["command"] for c in commands.params["commands"]] == [c for c, _ in COMMANDS]
        [webhook] = tg.calls_of("setWebhook")
        assert webhook.params["url"] == "https://bot.example/telegram/webhook"
        assert webhook.params["secret_token"] == TELEGRAM_SECRET
        assert tg.calls_of("getUpdates") == [] and tg.calls_of("deleteWebhook") == []

    async def test_polling_leaves_a_webhook_first(self, tg: FakeTelegram) -> None:
        tg.webhook = {"url": "https://old.example"}
        async with started(tg, mode="polling", polling_timeout=1):
            await tg.wait_for(lambda: tg.calls_of("getUpdates"))
        assert tg.webhook is None
        # Pending updates are kept: they are the bot's to answer.
        assert tg.calls_of("deleteWebhook")[0].params.get("drop_pending_updates") == "false"

    async def test_a_rejected_token_never_reaches_the_error_text(self, tg: FakeTelegram) -> None:
        channel = make(tg, token="123:not-the-token")
        with pytest.raises(Forbidden) as caught:
            await channel.start(Handler())
        assert "not-the-token" not in str(caught.value)
        assert "check channels.telegram.token" in str(caught.value)
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
        await channel.stop()

    async def test_commands_that_cannot_be_registered_do_not_stop_the_start(
        self, tg: FakeTelegram
    ) -> None:
        tg.fail_next("setMyCommands", 400, "Bad Request: commands are broken")
        with capture_logs() as logs:
            async with started(tg) as channel:
                assert channel.me is not None
        assert any(e["event"] == "telegram.set_commands_failed" for e in logs)

    def test_capabilities(self, tg: FakeTelegram) -> None:
        caps = make(tg).capabilities
        assert (caps.max_chars, caps.formatting, caps.threads, caps.edits) == (
            4000,
            "html",
            True,
            True,
        )
        assert caps.reactions and not make(tg, reactions=False).capabilities.reactions


class TestWebhook:
    async def test_an_update_is_handed_over_before_the_200(self, tg: FakeTelegram) -> None:
        handler = Handler()
        async with started(tg, handler) as channel:
            response = await post(channel, update(tg, tg.private_message("hello")))
        assert response.status_code == 200 and response.json() == {"ok": True}
        assert handler.texts() == ["hello"]

    @pytest.mark.parametrize("secret", [None, "", "wrong"])
    async def test_a_wrong_secret_is_401(self, tg: FakeTelegram, secret: str | None) -> None:
        handler = Handler()
        async with started(tg, handler) as channel:
            response = await post(channel, update(tg, tg.private_message("x")), secret=secret)
        assert response.status_code == 401
        assert handler.taken == []

    @pytest.mark.parametrize(
        "payload", [b"not json", b"[1, 2]", b'{"message": {}}', b'{"update_id": "7"}']
    )
    async def test_what_is_not_an_update_is_400(self, tg: FakeTelegram, payload: bytes) -> None:
        async with started(tg) as channel:
            with capture_logs() as logs:
                response = await post(channel, payload)
        assert response.status_code == 400
        [logged] = [e for e in logs if e["event"] == "telegram.webhook_malformed"]
        assert logged["size"] == len(payload)

    async def test_a_refused_update_is_503_and_its_redelivery_is_taken(
        self, tg: FakeTelegram
    ) -> None:
        handler = Handler(refuse=1)
        async with started(tg, handler) as channel:
            body = update(tg, tg.private_message("again"))
            assert (await post(channel, body)).status_code == 503
            assert (await post(channel, body)).status_code == 200
        assert handler.refused_texts() == ["again"] and handler.texts() == ["again"]

    async def test_a_redelivered_message_goes_to_the_handler_under_its_own_dedupe_key(
        self, tg: FakeTelegram
    ) -> None:
        # The bot dedupes messages on their own key where it stores them (tests/e2e/
        # test_telegram.py: a duplicate is answered once); the adapter adds no round trip.
        handler, seen = Handler(), MemorySeen()
        async with started(tg, handler, seen=seen) as channel:
            body = update(tg, tg.private_message("once"))
            assert (await post(channel, body)).status_code == 200
            assert (await post(channel, body)).status_code == 200
        first, again = handler.taken
        assert first.dedupe_key == again.dedupe_key
        assert seen.keys == set()

    async def test_an_update_that_is_not_a_message_is_recorded_and_skipped_once(
        self, tg: FakeTelegram
    ) -> None:
        handler, seen = Handler(), MemorySeen()
        edited = tg.private_message("changed")["message"] | {"edit_date": 1}
        body = update(tg, {"edited_message": edited})
        async with started(tg, handler, seen=seen) as channel:
            with capture_logs() as logs:
                assert (await post(channel, body)).status_code == 200
                assert (await post(channel, body)).status_code == 200
        reasons = [e["reason"] for e in logs if e["event"] == "inbound.skipped"]
        assert reasons == ["edited_message", "duplicate_update"]
        assert handler.taken == []
        assert seen.keys == {f"telegram:update:{body['update_id']}"}

    async def test_a_failing_handler_is_logged_and_the_update_counts_as_handled(
        self, tg: FakeTelegram
    ) -> None:
        handler = Handler(error=RuntimeError("boom"))
        async with started(tg, handler) as channel:
            body = update(tg, tg.private_message("bad"))
            with capture_logs() as logs:
                response = await post(channel, body)
        assert response.status_code == 200  # not redelivered forever
        assert any(e["event"] == "telegram.update_failed" for e in logs)

    async def test_an_update_that_does_not_parse_is_acknowledged(self, tg: FakeTelegram) -> None:
        handler = Handler()
        async with started(tg, handler) as channel:
            with capture_logs() as logs:
                response = await post(channel, {"update_id": 5, "message": {"chat": "nonsense"}})
        assert response.status_code == 200
        assert handler.taken == []
        assert any(e["event"] == "telegram.bad_update" for e in logs)

    async def test_not_receiving_is_503(self, tg: FakeTelegram) -> None:
        channel = make(tg)  # never started
        response = await post(channel, update(tg, tg.private_message("early")))
        assert response.status_code == 503

    async def test_a_group_migration_is_followed_by_later_calls(self, tg: FakeTelegram) -> None:
        handler = Handler()
        old = {"id": -777, "type": "group", "title": "Team"}
        moved = tg.message(None, chat=old, migrate_to_chat_id=-100777)
        async with started(tg, handler) as channel:
            assert (await post(channel, update(tg, moved))).status_code == 200
            await channel.send_text(ChatRef("telegram", "-777", ChatType.GROUP), "hi there")
            await channel.set_typing(ChatRef("telegram", "-777", ChatType.GROUP))
        assert handler.taken == []
        assert tg.sent[0]["chat_id"] == -100777
        assert tg.calls_of("sendChatAction")[0].params["chat_id"] == -100777


async def test_an_update_without_a_handler_is_not_accepted(tg: FakeTelegram) -> None:
    channel = make(tg)
    body = update(tg, tg.private_message("x"))
    with pytest.raises(NotAccepted):
        await channel._process_raw(body)


class TestChatActions:
    async def test_typing_goes_to_the_topic(self, tg: FakeTelegram) -> None:
        async with started(tg) as channel:
            await channel.set_typing(DM)
            await channel.set_typing(ChatRef("telegram", "-100777", ChatType.GROUP, "12"))
        first, second = (c.params for c in tg.calls_of("sendChatAction"))
        assert (first["chat_id"], first["action"], first.get("message_thread_id")) == (
            42,
            "typing",
            None,
        )
        assert (second["chat_id"], second["message_thread_id"]) == (-100777, 12)

    async def test_a_reaction_is_set_then_cleared(self, tg: FakeTelegram) -> None:
        message = MessageRef(chat=DM, message_id="77")
        async with started(tg) as channel:
            await channel.add_reaction(message, "👀")
            await channel.remove_reaction(message, "👀")
        added, removed = (c.params for c in tg.calls_of("setMessageReaction"))
        assert (added["message_id"], added["reaction"]) == (77, [{"type": "emoji", "emoji": "👀"}])
        assert removed.get("reaction") in ([], None)

    async def test_a_refused_reaction_raises(self, tg: FakeTelegram) -> None:
        async with started(tg) as channel:
            with pytest.raises(BadRequest, match=r"(?i)reaction_invalid"):
                await channel.add_reaction(MessageRef(chat=DM, message_id="77"), "🍕")


class TestAdmins:
    async def test_everyone_is_admin_of_their_private_chat(self, tg: FakeTelegram) -> None:
        async with started(tg) as channel:
            assert await channel.is_admin(DM, "42")
        assert tg.calls_of("getChatAdministrators") == []

    async def test_group_admins_are_asked_once_a_minute(self, tg: FakeTelegram) -> None:
        tg.admins[-100777] = {7}
        async with started(tg) as channel:
            assert await channel.is_admin(TEAM, "7")
            assert not await channel.is_admin(TEAM, "42")
            tg.admins[-100777] = {42}
            assert not await channel.is_admin(TEAM, "42")  # cached
        assert len(tg.calls_of("getChatAdministrators")) == 1

    async def test_the_cache_expires(
        self, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import channels.telegram._channel as module

        monkeypatch.setattr(module, "ADMIN_CACHE_SECONDS", 0.0)
        tg.admins[-100777] = {7}
        async with started(tg) as channel:
            assert await channel.is_admin(TEAM, "7")
            tg.admins[-100777] = {42}
            assert await channel.is_admin(TEAM, "42")
        assert len(tg.calls_of("getChatAdministrators")) == 2


class TestFiles:
    async def test_a_file_is_fetched_with_getfile_and_the_file_url(self, tg: FakeTelegram) -> None:
        file_id = tg.add_file(b"\xff\xd8 picture", file_path="photos/file_7.jpg")
        attachment = Attachment("image", file_id, "p.jpg", "image/jpeg", 11)
        async with started(tg) as channel:
            assert isinstance(channel, FileFetcher)
            data = await channel.fetch_file(attachment)
        assert data == b"\xff\xd8 picture"
        assert tg.calls_of("getFile")[0].params["file_id"] == file_id
        assert tg.file_downloads == ["photos/file_7.jpg"]

    async def test_an_unknown_file_id_is_a_bad_request(self, tg: FakeTelegram) -> None:
        async with started(tg) as channel:
            with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
                await channel.fetch_file(Attachment("image", "gone", "p.jpg", "image/jpeg"))
        assert tg.file_downloads == []
