"""What Slack sends the bot, for tests: event payloads and a signing Events API sender.

Payload builders (:func:`message_event`, :func:`app_mention_event`, :func:`event_callback`) shape
events like Slack's, with real-clock ``seconds.micros`` timestamps (:func:`next_ts`) so the fake's
``oldest`` filters work. :class:`EventSender` posts them to the bot's ``/slack/events``, signed
(v0 HMAC) with the app's signing secret, or forged / backdated. Over Socket Mode the same payloads
go through :meth:`tests.fakes.slack_server.FakeSlack.push` instead.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "EventSender",
    "app_mention_event",
    "event_callback",
    "message_event",
    "next_id",
    "next_ts",
]

_ids = itertools.count(1)
_last_ts = 0.0


def next_id() -> int:
    """A number never handed out before in this process (event ids, envelopes, tickets...)."""
    return next(_ids)


def next_ts() -> str:
    """A unique, increasing Slack message timestamp (``seconds.micros`` of the real clock)."""
    global _last_ts
    _last_ts = max(time.time(), _last_ts + 1e-6)
    return f"{_last_ts:.6f}"


def message_event(
    text: str,
    *,
    user: str = "UALICE",
    channel: str = "C1",
    channel_type: str | None = None,
    ts: str | None = None,
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    kind = channel_type or ("im" if channel.startswith("D") else "channel")
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "channel_type": kind,
        "user": user,
        "text": text,
        "ts": ts or next_ts(),
        "event_ts": ts or next_ts(),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return event


def app_mention_event(message: dict[str, Any]) -> dict[str, Any]:
    """The ``app_mention`` Slack sends alongside ``message`` for the same post."""
    event = {k: v for k, v in message.items() if k != "channel_type"}
    event["type"] = "app_mention"
    return event


def event_callback(
    event: dict[str, Any], *, event_id: str | None = None, team: str = "T1"
) -> dict[str, Any]:
    return {
        "token": "legacy-verification-token",
        "team_id": team,
        "api_app_id": "A1",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next_id():08d}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team, "user_id": "UBOT", "is_bot": True, "is_enterprise_install": False}
        ],
    }


@dataclass
class EventSender:
    """Posts Events API requests to the bot, signed like Slack does (or not)."""

    client: httpx.AsyncClient
    signing_secret: str
    path: str = "/slack/events"

    def headers(
        self, body: bytes, *, timestamp: int | None = None, secret: str | None = None
    ) -> dict[str, str]:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        key = (self.signing_secret if secret is None else secret).encode()
        signature = "v0=" + hmac.new(key, base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}

    async def send(
        self,
        payload: dict[str, Any],
        *,
        retry_num: int | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
    ) -> httpx.Response:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        headers |= self.headers(body, timestamp=timestamp, secret=secret)
        if retry_num is not None:
            headers |= {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "timeout"}
        return await self.client.post(self.path, content=body, headers=headers)

    async def send_event(
        self, event: dict[str, Any], *, event_id: str | None = None, **kw: Any
    ) -> httpx.Response:
        return await self.send(event_callback(event, event_id=event_id), **kw)

    async def send_interaction(self, payload: dict[str, Any]) -> httpx.Response:
        """An interaction (a button click), form-encoded as ``payload=<json>`` like Slack."""
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"} | self.headers(body)
        return await self.client.post(self.path, content=body, headers=headers)

    async def send_command(self, command: str, *, user: str, channel: str) -> httpx.Response:
        """A slash command, form-encoded like Slack sends it."""
        form = {
            "command": command,
            "text": "",
            "user_id": user,
            "user_name": user.lower(),
            "channel_id": channel,
            "team_id": "T1",
            "trigger_id": f"trigger-{next_id()}",
            "response_url": "http://127.0.0.1:9/unused",
        }
        body = urllib.parse.urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"} | self.headers(body)
        return await self.client.post(self.path, content=body, headers=headers)


def block_actions(
    value: str,
    *,
    user: str = "UALICE",
    channel: str = "C1",
    message_ts: str = "",
    thread_ts: str | None = None,
    action_id: str = "loopgate_command_0",
) -> dict[str, Any]:
    """The interaction Slack sends when a button of one of our messages is clicked."""
    message: dict[str, Any] = {"type": "message", "user": "UBOT", "ts": message_ts or next_ts()}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "team": {"id": "T1", "domain": "t1"},
        "user": {"id": user, "username": user.lower(), "team_id": "T1"},
        "api_app_id": "A1",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel},
        "trigger_id": f"trigger-{next_id()}",
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "b1",
                "text": {"type": "plain_text", "text": value},
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
