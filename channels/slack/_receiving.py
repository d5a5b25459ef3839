"""Slack events in: bolt's app behind the HTTP Events API or Socket Mode, each event handed to
the bot before it is acknowledged.

Bolt verifies (HTTP: v0 signature and 5-minute timestamp window), answers ``url_verification``
and drops our own events. A ``message`` / ``app_mention`` event is deduped, normalized
(:mod:`channels.slack._inbound`: sessions per thread, routing of ``/stop``) and handed to the bot
*before* bolt acknowledges it (``process_before_response``): the handler only stores the message,
so Slack still gets its ack well within 3 s, and an event is never acknowledged unless the bot
has it. When the bot does not take it (:class:`~channels.errors.NotAccepted`) the listener
returns a 503: over HTTP that is the answer, and Slack retries; in Socket Mode bolt's
``send_async_response`` sends nothing for a non-200, so the envelope stays unacknowledged and
Slack delivers it again. The event counts as seen only once the handler returned; until then
nothing persistent says so, and the in-memory records of a refused event are forgotten, so the
redelivery is not skipped. Slash commands are acknowledged first (they carry no message to keep).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from slack_bolt.adapter.socket_mode.async_internals import (
    run_async_bolt_app,
    send_async_response,
)
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from channels.errors import NotAccepted
from channels.intake import Intake
from channels.protocol import InboundHandler
from channels.slack._choices import ACTION_ID, click_message
from channels.slack._inbound import COMMANDS, InboundNormalizer
from channels.slack._settings import SlackSettings
from channels.slack._socket import FailFastSocketModeClient
from channels.slack._status import Spawn
from channels.types import InboundMessage

log = structlog.get_logger(__name__)


class EventReceiver:
    """The bolt app and its listeners; ``handler`` is the bot's, set while receiving."""

    def __init__(
        self,
        settings: SlackSettings,
        client: AsyncWebClient,
        inbound: InboundNormalizer,
        spawn: Spawn,
    ) -> None:
        self.settings = settings
        self.inbound = inbound
        self._spawn = spawn
        self.handler: InboundHandler | None = None
        self.intake = Intake()
        self._signature = SignatureVerifier(settings.signing_secret)
        self.app = self._build_app(client)

    def _build_app(self, client: AsyncWebClient) -> AsyncApp:
        http = self.settings.mode == "http"
        app = AsyncApp(
            client=client,
            signing_secret=self.settings.signing_secret,
            request_verification_enabled=http,
            # Listeners run before the ack is sent, so an event is acked only once stored.
            process_before_response=True,
            ignoring_self_events_enabled=True,
        )
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_mention_event)
        for name in ("assistant_thread_started", "assistant_thread_context_changed"):
            app.event(name)(self._on_ignored_event)
        for command in COMMANDS:
            app.command(command)(self._on_command)
        app.action(ACTION_ID)(self._on_action)
        return app

    # -- transports --------------------------------------------------------------------------

    async def handle_webhook(self, request: Request) -> Response:
        """``POST /slack/events``: bolt verifies, our listener hands the event over, then bolt
        answers (200, or 503 when the bot did not take it)."""
        if self.settings.mode != "http" or self.handler is None or not self.intake.open:
            return JSONResponse({"error": "slack http mode is not running"}, 503)
        body = await request.body()
        # Checked before bolt parses the body: an unsigned request costs no parsing.
        if not self._signature.is_valid_request(body, dict(request.headers)):
            log.warning("slack.webhook_rejected", reason="bad_signature", size=len(body))
            return JSONResponse({"error": "invalid signature"}, 401)
        bolt_request = AsyncBoltRequest(
            body=body.decode("utf-8", errors="replace"),
            query=dict(request.query_params),
            headers=dict(request.headers),
        )
        if retry := request.headers.get("x-slack-retry-num"):
            log.info(
                "slack.event_retry",
                retry=retry,
                reason=request.headers.get("x-slack-retry-reason", ""),
            )
        with self.intake.handing_over():
            response = await self.app.async_dispatch(bolt_request)
        return Response(
            content=response.body,
            status_code=response.status,
            headers=response.first_headers_without_set_cookie(),
        )

    async def on_socket_request(
        self, client: FailFastSocketModeClient, req: SocketModeRequest
    ) -> None:
        if not self.intake.open:
            # Not acknowledged: Slack delivers the envelope again, to the next process.
            log.info("slack.envelope_refused", envelope_id=req.envelope_id, reason="stopping")
            return
        started = time.time()
        with self.intake.handing_over():
            response = await run_async_bolt_app(self.app, req)
            # Sends the ack for a 200 only: a 503 (not accepted) leaves the envelope unacked.
            await send_async_response(client, req, response, started)

    # -- bolt listeners: events are handed over before the ack, commands after ---------------

    async def _on_message_event(
        self, body: dict[str, Any], event: dict[str, Any]
    ) -> BoltResponse | None:
        return await self._accept(event, body, mention=False)

    async def _on_mention_event(
        self, body: dict[str, Any], event: dict[str, Any]
    ) -> BoltResponse | None:
        return await self._accept(event, body, mention=True)

    async def _on_ignored_event(self, event: dict[str, Any]) -> None:
        log.debug("slack.event_ignored", type=event.get("type"))

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        self._spawn(self._process_command(command), name="slack:command")

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        # A button click (send_choices): acknowledged first, like a slash command; it carries
        # no message to keep.
        await ack()
        msg = click_message(self.inbound.name, body)
        if msg is not None:
            self._spawn(self._handle_command(msg), name="slack:command")

    # -- inbound -----------------------------------------------------------------------------

    async def _accept(
        self, event: dict[str, Any], body: dict[str, Any], *, mention: bool
    ) -> BoltResponse | None:
        """Hand the event over; a 503 for bolt to answer when the bot did not take it."""
        try:
            await self._process(event, body, mention=mention)
        except NotAccepted as exc:
            log.info("slack.not_accepted", event_id=body.get("event_id"), error=str(exc))
            return BoltResponse(status=503, body="")
        return None  # bolt acks with its default 200

    async def _process(self, event: dict[str, Any], body: dict[str, Any], *, mention: bool) -> None:
        """Raises only :class:`NotAccepted`; any other failure is logged and the event acked, so
        a bad event can't be redelivered forever."""
        try:
            msg = await self.inbound.event(event, body, mention=mention)
        except NotAccepted:
            raise
        except Exception:
            log.exception("slack.event_failed", event_id=body.get("event_id"))
            return
        if msg is None:
            return
        handler = self.handler
        try:
            if handler is None:
                raise NotAccepted("slack: not receiving")
            await handler(msg)
        except (NotAccepted, asyncio.CancelledError):
            # Cancelled: whether the bot stored it is unknown. If it did, its own dedupe key
            # catches the redelivery; ours must not hide it if it did not.
            self.inbound.forget(msg)
            raise
        except Exception:
            log.exception("slack.event_failed", event_id=body.get("event_id"))
            return
        await self.inbound.remember(msg)

    async def _process_command(self, command: dict[str, Any]) -> None:
        msg = self.inbound.command(command)
        if msg is not None:
            await self._handle_command(msg)

    async def _handle_command(self, msg: InboundMessage) -> None:
        if self.handler is None:
            return
        try:
            await self.handler(msg)
        except Exception:
            log.exception("slack.command_failed", command=msg.text)
