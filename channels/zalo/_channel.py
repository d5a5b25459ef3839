"""The Zalo channel: receives by long polling or webhook, normalizes, sends plain text.

Zalo has no reactions, edits, threads or replies-to-message: :attr:`ZaloChannel.capabilities`
says so and the pipeline adapts (reaction calls are no-ops here, ``reply_to`` is ignored).
Both transports feed one path, :meth:`ZaloChannel._dispatch`: skip what is not a user message,
drop what was already seen (persistent, so a restart or a webhook redelivery is not a replay),
normalize, hand to the bot.

Zalo is acknowledged only once the bot has the message. A webhook answers after the handler
returned, 503 when it did not take the message (:class:`~channels.errors.NotAccepted`), so Zalo
delivers it again. ``getUpdates`` has no offset: an update is Zalo's no more once fetched, so the
poller keeps offering it to the bot until the bot takes it.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from channels.downloads import download
from channels.errors import ChannelError, NotAccepted, RetryAfter
from channels.intake import Intake, already_seen, remember_seen
from channels.protocol import InboundHandler, PollGate, SeenStore, SentFile
from channels.types import (
    Attachment,
    Capabilities,
    ChatRef,
    ChatType,
    InboundMessage,
    MessageRef,
    Sender,
)
from channels.zalo._client import ZaloBotClient
from channels.zalo._errors import (
    ZaloNetworkError,
    ZaloPollIdle,
    ZaloServerError,
    ZaloTokenInvalid,
)
from channels.zalo._files import ZaloFiles
from channels.zalo._normalize import content_text, photo_attachments, synthetic_id
from channels.zalo._photo_links import PhotoLinks
from channels.zalo._types import BotInfo, ZaloMessage, ZaloUpdate, parse_updates

log = structlog.get_logger(__name__)

__all__ = [
    "CAPABILITIES",
    "MAX_WEBHOOK_BODY",
    "SECRET_HEADER",
    "WEBHOOK_PATH",
    "ZaloChannel",
    "ZaloSettings",
    "content_text",
    "photo_attachments",
]

WEBHOOK_PATH = "/zalo/webhook"
SECRET_HEADER = "x-bot-api-secret-token"
MAX_WEBHOOK_BODY = 256 * 1024
CAPABILITIES = Capabilities(
    max_chars=2000, formatting="plain", typing=True, reactions=False, threads=False, edits=False
)


@dataclass(frozen=True, slots=True)
class ZaloSettings:
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    webhook_secret: str = ""
    poll_timeout: int = 30
    """Seconds one ``getUpdates`` long poll may wait for an event."""
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    group_delivery: Literal["all", "addressed_only"] = "all"
    """``all``: Zalo delivers every group message and we look for a mention or a reply to the bot.
    ``addressed_only``: Zalo delivers only messages addressed to the bot, so each one counts."""
    mention_names: tuple[str, ...] = ()
    """Names that address the bot as ``@name`` in groups, besides those ``getMe`` returns."""
    handover_grace: float = 10.0
    """Seconds ``stop_receiving`` keeps offering fetched updates the bot does not take; what is
    left after that is lost (Zalo can't deliver it again) and logged as ``zalo.updates_lost``."""


# Failures worth retrying a set-up call for: the platform (or our token) may come right.
_RETRYABLE = (RetryAfter, ZaloTokenInvalid, ZaloServerError, ZaloNetworkError)


class ZaloChannel:
    name = "zalo"
    capabilities = CAPABILITIES

    def __init__(
        self,
        client: ZaloBotClient,
        settings: ZaloSettings,
        seen: SeenStore,
        poll_gate: PollGate | None = None,
    ) -> None:
        self.client = client
        self.poll_gate = poll_gate
        self.settings = settings
        self.seen = seen
        # The bot's server routes POST {webhook_path} here; in polling mode nothing matches.
        self.webhook_path = WEBHOOK_PATH if settings.mode == "webhook" else ""
        # Only a public server (webhook mode) can offer Zalo a picture to fetch for sendPhoto.
        self.photo_links = (
            PhotoLinks(settings.webhook_url, settings.webhook_secret)
            if settings.mode == "webhook" and settings.webhook_url and settings.webhook_secret
            else None
        )
        self.files = ZaloFiles(client, self.photo_links)
        self.files_path = self.files.path
        self.bot: BotInfo | None = None
        self._handler: InboundHandler | None = None
        self._runner: asyncio.Task[None] | None = None
        self._receiving = False
        self._handing_over = False  # the poller holds fetched updates not yet handed over
        self._intake = Intake()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, on_message: InboundHandler) -> None:
        self._handler = on_message
        self._receiving = True
        # Network set-up runs in the background: a Zalo outage must not stop the other channels.
        self._runner = asyncio.create_task(self._run(), name="zalo:runner")

    async def stop_receiving(self) -> None:
        """Stop polling (webhooks answer 503 from now on); sending keeps working.

        A poll in flight is cancelled, but a batch already fetched is handed over first: Zalo
        can't deliver it again. (Cancelling a long poll whose answer is already on the wire
        could lose that answer; the window is one network transit, and no other way ends a
        30-second long poll within a shutdown's grace.)
        """
        self._receiving = False
        runner, self._runner = self._runner, None
        if runner is not None:
            if not self._handing_over:
                runner.cancel()
            done, _ = await asyncio.wait({runner}, timeout=self.settings.handover_grace)
            if not done:
                runner.cancel()  # the hand-over logs what it gives up
            try:
                await runner
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("zalo.runner_failed")
        busy = await self._intake.close()
        if busy:
            log.warning("zalo.webhooks_unfinished", count=busy)

    async def stop(self) -> None:
        await self.stop_receiving()
        self._handler = None
        await self.client.aclose()

    async def _run(self) -> None:
        await self._learn_identity()
        if self.settings.mode == "webhook":
            await self._until_done("setWebhook", self._set_webhook)
        else:
            await self._until_done("deleteWebhook", self._leave_webhook)
            await self._poll_forever()

    async def _learn_identity(self) -> None:
        try:
            self.bot = await self.client.get_me()
            log.info("zalo.connected", bot_id=self.bot.id, account=self.bot.account_name)
        except ZaloTokenInvalid as exc:
            log.error("zalo.token_invalid", error=str(exc), fix="check channels.zalo.token")
        except Exception as exc:
            log.warning("zalo.get_me_failed", error=str(exc))

    async def _set_webhook(self) -> None:
        info = await self.client.set_webhook(
            self.settings.webhook_url, self.settings.webhook_secret
        )
        log.info("zalo.webhook_set", url=info.url or self.settings.webhook_url)

    async def _leave_webhook(self) -> None:
        # getUpdates returns nothing while a webhook is set; the config asks for polling.
        info = await self.client.get_webhook_info()
        if info.url:
            log.warning("zalo.webhook_deleted_for_polling", url=info.url)
            await self.client.delete_webhook()

    async def _until_done(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        """Run a set-up step, retrying while that can help (network, 5xx, 429, a token someone
        may fix). Any other failure is logged and the channel goes on: an answer we did not
        expect must not keep it from ever serving, and getUpdates reports a real conflict."""
        failures = 0
        while True:
            try:
                await step()
                return
            except _RETRYABLE as exc:
                await self._back_off(what, exc, failures)
                failures += 1
            except Exception as exc:
                error = str(exc) if isinstance(exc, ChannelError) else repr(exc)
                log.warning("zalo.setup_step_skipped", method=what, error=error)
                return

    async def _poll_forever(self) -> None:
        failures = 0
        while self._receiving:
            if self.poll_gate is not None and not self.poll_gate.holds():
                await self.poll_gate.wait_turn()
                log.info("zalo.poller_elected")
            try:
                # A batch fetched after the lease is lost is still handed over: Zalo does not
                # deliver an update twice, and the dedupe store is shared by all processes.
                updates = await self.client.get_updates(self.settings.poll_timeout)
            except ZaloPollIdle:
                failures = 0  # the normal end of an idle long poll
                continue
            except Exception as exc:
                await self._back_off("getUpdates", exc, failures)
                failures += 1
                continue
            failures = 0
            self._handing_over = True
            try:
                await self._hand_over(updates)
            finally:
                self._handing_over = False

    async def _hand_over(self, updates: Sequence[ZaloUpdate]) -> None:
        """Offer each update until the bot takes it, in order: Zalo won't deliver it again."""
        pending = deque(updates)
        failures = 0
        try:
            while pending:
                try:
                    await self._dispatch(pending[0])
                except NotAccepted as exc:
                    delay = self.backoff_delay(failures)
                    failures += 1
                    log.warning(
                        "zalo.not_accepted", pending=len(pending), error=str(exc), retry_in=delay
                    )
                    await asyncio.sleep(delay)
                    continue
                pending.popleft()
                failures = 0
        except asyncio.CancelledError:
            if pending:
                log.error(
                    "zalo.updates_lost",
                    count=len(pending),
                    message_ids=[u.message.message_id for u in pending if u.message],
                )
            raise

    def backoff_delay(self, failures: int) -> float:
        """Doubling delay after consecutive failures, capped (no jitter: one poller per bot)."""
        s = self.settings
        return float(min(s.backoff_max, s.backoff_initial * 2 ** min(failures, 30)))

    async def _back_off(self, what: str, exc: BaseException, failures: int) -> None:
        delay = self.backoff_delay(failures)
        if isinstance(exc, RetryAfter):
            delay = max(delay, exc.retry_after)
        if isinstance(exc, ZaloTokenInvalid):
            # Logged every time, on purpose: the bot is deaf until someone fixes the token.
            log.error(
                "zalo.token_invalid",
                method=what,
                error=str(exc),
                retry_in=delay,
                fix="check channels.zalo.token",
            )
        elif isinstance(exc, ChannelError):
            log.warning("zalo.call_failed", method=what, error=str(exc), retry_in=delay)
        else:
            log.error("zalo.call_failed", method=what, error=repr(exc), retry_in=delay)
        await asyncio.sleep(delay)

    # -- inbound ---------------------------------------------------------------------------

    async def handle_webhook(self, request: Request) -> Response:
        """Verify, hand the update(s) over, then answer: 200 once the bot has them, 503 when it
        did not take one (Zalo delivers the body again; what was taken is deduped)."""
        if self.settings.mode != "webhook":
            return JSONResponse({"ok": False, "description": "webhook mode is off"}, 404)
        given = request.headers.get(SECRET_HEADER, "")
        if not secrets.compare_digest(given.encode(), self.settings.webhook_secret.encode()):
            log.warning("zalo.webhook_unauthorized", client=request.client and request.client.host)
            return JSONResponse({"ok": False, "description": "unauthorized"}, 401)
        if self._handler is None or not self._intake.open:
            return JSONResponse({"ok": False, "description": "not receiving"}, 503)
        body = await request.body()
        if len(body) > MAX_WEBHOOK_BODY:
            log.warning("zalo.webhook_too_large", size=len(body), limit=MAX_WEBHOOK_BODY)
            return JSONResponse({"ok": False, "description": "body too large"}, 413)
        try:
            data = json.loads(body)
        except ValueError:
            log.warning("zalo.webhook_malformed", size=len(body))
            return JSONResponse({"ok": False, "description": "invalid JSON"}, 400)
        updates = parse_updates(data)
        if not updates:
            # Still acknowledged: Zalo's webhook shapes are not fully documented, and refusing a
            # shape we don't know would only make Zalo redeliver it.
            shape = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
            log.warning("zalo.webhook_unrecognized", shape=shape)
        with self._intake.handing_over():
            for update in updates:
                try:
                    await self._dispatch(update)
                except NotAccepted as exc:
                    log.info("zalo.not_accepted", event_name=update.event_name, error=str(exc))
                    return JSONResponse({"ok": False, "description": "not accepted"}, 503)
        return JSONResponse({"ok": True})

    async def _dispatch(self, update: ZaloUpdate) -> None:
        """Dedupe, normalize and hand over one update.

        Raises only :class:`NotAccepted` (the bot did not take it: don't treat it as consumed);
        any other failure is logged and the update counts as handled.
        """
        msg = update.message
        if msg is None or msg.sender.is_bot:
            log.info("zalo.event_ignored", event_name=update.event_name)
            return
        handler = self._handler
        if handler is None:
            raise NotAccepted("zalo: not receiving")
        message_id = msg.message_id or synthetic_id(update)
        key = f"zalo:event:{msg.chat_id}:{message_id}"
        if await already_seen(self.seen, key, channel=self.name):
            log.info("zalo.duplicate", message_id=message_id)
            return
        try:
            await handler(self._normalize(update, msg, message_id))
        except (NotAccepted, asyncio.CancelledError):
            # Not recorded as seen: the next delivery counts. Cancelled: whether the bot stored
            # it is unknown; if it did, the message's own dedupe key catches the next delivery.
            raise
        except Exception:
            log.exception(
                "zalo.dispatch_failed", message_id=message_id, event_name=update.event_name
            )
        # Recorded only once the bot has it: a kill before this line loses nothing.
        await remember_seen(self.seen, key, channel=self.name)

    def _normalize(self, update: ZaloUpdate, msg: ZaloMessage, message_id: str) -> InboundMessage:
        group = msg.chat_type == "GROUP"
        chat = ChatRef(self.name, msg.chat_id, ChatType.GROUP if group else ChatType.DIRECT)
        text = content_text(update.event_name, msg)
        addressed = True
        if group:
            mentioned, text = self._strip_mention(text, msg)
            replied = self.bot is not None and msg.reply_to_sender_id == self.bot.id
            addressed = (
                self.settings.group_delivery == "addressed_only" or mentioned or bool(replied)
            )
        metadata = {"event_name": update.event_name}
        if self.bot and self.bot.account_name:
            metadata["bot_username"] = self.bot.account_name
        received = datetime.fromtimestamp(msg.date / 1000, UTC) if msg.date else datetime.now(UTC)
        return InboundMessage(
            chat=chat,
            message_id=message_id,
            sender=Sender(msg.sender.id, msg.sender.display_name),
            text=text,
            addressed=addressed,
            received_at=received,
            metadata=metadata,
            attachments=photo_attachments(update.event_name, msg, message_id),
        )

    def _names(self) -> list[str]:
        names = list(self.settings.mention_names)
        if self.bot is not None:
            names += [self.bot.display_name, self.bot.account_name]
        return sorted({n.strip().lstrip("@") for n in names if n.strip()}, key=len, reverse=True)

    def _strip_mention(self, text: str, msg: ZaloMessage) -> tuple[bool, str]:
        """Whether the bot is @mentioned; a leading mention is removed so ``@Bot /stop`` works."""
        mentioned = self.bot is not None and bool(self.bot.id) and self.bot.id in msg.mention_ids
        for name in self._names():
            pattern = re.compile(rf"(?<!\w)@{re.escape(name)}(?!\w)", re.IGNORECASE)
            if pattern.search(text):
                mentioned = True
                lead = re.compile(rf"^\s*@{re.escape(name)}(?!\w)[\s,:]*", re.IGNORECASE)
                text = lead.sub("", text, count=1)
                break
        return mentioned, text

    # -- outbound --------------------------------------------------------------------------

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        # Zalo has no reply-to-message; the chunk goes to the chat.
        sent = await self.client.send_message(chat.chat_id, text)
        return MessageRef(chat, sent.message_id)

    async def send_file(
        self,
        chat: ChatRef,
        path: Path,
        *,
        name: str,
        mime: str,
        caption: str = "",
        reply_to: str | None = None,
    ) -> SentFile:
        """:class:`~channels.protocol.FileSending`: ``sendPhoto`` from a signed link in webhook
        mode, else a note naming the file (:mod:`channels.zalo._files`)."""
        return await self.files.send_file(chat, path, name=name, mime=mime, caption=caption)

    async def serve_file(self, request: Request) -> Response:
        """:class:`~channels.protocol.FileHost`: see :meth:`ZaloFiles.serve_file`."""
        return await self.files.serve_file(request)

    async def set_typing(self, chat: ChatRef) -> None:
        await self.client.send_chat_action(chat.chat_id, "typing")

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        """Zalo bots can't react; ``capabilities.reactions`` is False so this is never needed."""

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None:
        """See :meth:`add_reaction`."""

    async def fetch_file(self, attachment: Attachment, *, max_bytes: int | None = None) -> bytes:
        # ``file_id`` is the photo's URL on Zalo's CDN: a plain GET, without the bot token
        # (it belongs in the Bot API's path, nowhere else).
        return await download(attachment.file_id, max_bytes=max_bytes)

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        # The Bot API has no chat-member lookup: only configured admins count.
        return False
