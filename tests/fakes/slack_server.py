"""A real-HTTP fake of the Slack Web API and Socket Mode, for tests.

It listens on 127.0.0.1 (a free port) inside the test's event loop; the real slack_sdk /
slack-bolt clients talk to it through ``base_url``::

    async with FakeSlack() as slack:
        slack.fail("chat.postMessage", status=429, retry_after=1)   # next call only
        slack.fail("chat.postMessage", status=500, after_posting=True)   # posted, yet a 500
        ... start the bot with api_base_url=slack.base_url ...
        await slack.push_event(message_event("hi", channel="D1"))   # over Socket Mode
        await slack.wait_for(lambda: slack.posts)
        assert slack.posts[0].channel == "D1"

Web API methods: auth.test, chat.postMessage, chat.update, chat.delete, chat.startStream /
appendStream / stopStream, reactions.add/remove (``already_reacted`` / ``no_reaction``),
assistant.threads.setStatus, conversations.replies/history/info, users.info, the three steps
of ``files_upload_v2`` (files.getUploadURLExternal, a POST of the bytes to the upload URL it
gives, files.completeUploadExternal: the shared files land in :attr:`FakeSlack.files`) and
apps.connections.open, which hands out ``ws://127.0.0.1:<port>/socket-mode``. A bot token other
than ``bot_token`` gets ``invalid_auth`` (so does every token after :meth:`revoke`). Message
timestamps are real-clock ``seconds.micros`` like Slack's, so ``oldest`` filters work.

Every text a message showed is kept in order in :attr:`FakeSlack.message_history` (a post, each
edit, each streamed append), so a test can check every state a user could have seen; deleted
messages are listed in :attr:`FakeSlack.deleted`. Streams behave like Slack's: ``thread_ts`` is
required, a channel (not a DM) needs ``recipient_user_id`` and ``recipient_team_id``, 12,000
characters of ``markdown_text`` per call and per edited message, an edit of a message still
streaming is ``streaming_state_conflict``, a stream ends by itself after :attr:`stream_lifetime`
(later appends: ``message_not_in_streaming_state``); :meth:`end_stream` ends one early (the user
pressed stop: ``stopped_by_user``). With ``streaming_supported = False`` every
``chat.startStream`` answers :attr:`streaming_error`, as in a workspace or for an app that can't
stream.

Failures (:meth:`fail`, :meth:`hang`) are queued per method: refused outright, carried out and
then answered with an error (``after_posting``), or carried out and answered only after a delay
the client's timeout doesn't wait for.

The events Slack sends the bot (payload builders, the signed Events API sender) are in
:mod:`tests.fakes.slack_events`; they are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fakes.server import FakeServer
from tests.fakes.slack_events import (
    EventSender,
    app_mention_event,
    event_callback,
    message_event,
    next_id,
    next_ts,
)

__all__ = [
    "ApiCall",
    "EventSender",
    "FakeSlack",
    "Post",
    "SharedFile",
    "app_mention_event",
    "event_callback",
    "message_event",
    "next_ts",
]


@dataclass(frozen=True)
class ApiCall:
    method: str
    args: dict[str, Any]
    token: str
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Post:
    channel: str
    text: str
    thread_ts: str | None
    ts: str


@dataclass(frozen=True)
class SharedFile:
    """A file uploaded with ``files_upload_v2`` and shared by ``files.completeUploadExternal``."""

    id: str
    filename: str
    title: str
    data: bytes
    channel: str
    thread_ts: str | None
    initial_comment: str
    ts: str  # the message that shows it


@dataclass
class _PendingUpload:
    filename: str
    length: int
    data: bytes | None = None


@dataclass
class _Stream:
    expires: float  # time.monotonic() when Slack ends it
    ended: str = ""  # the error later calls get once the stream ended by itself


@dataclass
class _Failure:
    status: int
    error: str
    retry_after: float | None = None
    after_posting: bool = False
    """Carry the call out, then answer with the error anyway."""
    hang: float | None = None
    """Carry the call out, then answer (normally) only after this many seconds."""


@dataclass
class FakeSlack(FakeServer):
    name = "FakeSlack"
    url_path = "/api/"
    ws = "websockets-sansio"
    ws_ping_interval = None
    graceful_shutdown = 2

    bot_token: str = "xoxb-test"
    app_token: str = "xapp-test"
    signing_secret: str = "s3cr3t"
    bot_user_id: str = "UBOT"
    bot_id: str = "BBOT"
    team_id: str = "T1"
    calls: list[ApiCall] = field(default_factory=list)
    posts: list[Post] = field(default_factory=list)
    reactions: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    reaction_log: list[tuple[str, str, str, str]] = field(default_factory=list)
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    status_log: list[tuple[str, str, str]] = field(default_factory=list)
    threads: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Top-level messages per channel, oldest first (the bot's posts outside threads)."""
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    socket_connections: int = 0
    revoked: bool = False
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Every message the fake holds by (channel, ts): seeded, posted or streamed."""
    message_history: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """Each text a message of the bot showed, in order: as posted, after each edit or append."""
    deleted: list[tuple[str, str]] = field(default_factory=list)
    streaming_supported: bool = True
    streaming_error: str = "unknown_method"
    """What ``chat.startStream`` answers while ``streaming_supported`` is False."""
    stream_lifetime: float = 300.0
    """Seconds a stream started from now on stays open; Slack ends one after about 5 minutes."""
    latency: dict[str, float] = field(default_factory=dict)
    """Seconds a method takes before Slack carries it out (a slow or busy Slack), by method."""
    files: list[SharedFile] = field(default_factory=list)
    """Files shared in a conversation (``files_upload_v2``'s three steps), in order."""

    def __post_init__(self) -> None:
        FakeServer.__init__(self)
        self._failures: dict[str, deque[_Failure]] = {}
        self._socket: WebSocket | None = None
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._uploads: dict[str, _PendingUpload] = {}

    # -- control ---------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        *,
        status: int = 200,
        error: str = "",
        retry_after: float | None = None,
        after_posting: bool = False,
    ) -> None:
        """Make the next call of ``method`` fail (queue several by calling again).

        With ``after_posting`` the call is carried out first (the message is posted) and the
        error is the answer nonetheless, as when Slack fails after storing the message.
        """
        default = "ratelimited" if status == 429 else "internal_error" if status >= 500 else ""
        self._failures.setdefault(method, deque()).append(
            _Failure(status, error or default or "fatal_error", retry_after, after_posting)
        )

    def hang(self, method: str, seconds: float = 30.0) -> None:
        """Carry out the next call of ``method``, then keep its answer back for ``seconds``."""
        self._failures.setdefault(method, deque()).append(_Failure(200, "", hang=seconds))

    def revoke(self) -> None:
        """Every later call answers ``token_revoked``."""
        self.revoked = True

    @property
    def socket_open(self) -> bool:
        """Whether a Socket Mode client is connected right now."""
        return self._socket is not None

    def calls_of(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def add_thread(self, channel: str, messages: list[dict[str, Any]]) -> str:
        """Seed a thread (for conversations.replies); returns the parent ts."""
        parent = str(messages[0]["ts"])
        self.threads[(channel, parent)] = [dict(m) for m in messages]
        for message in self.threads[(channel, parent)]:
            self.messages[(channel, str(message["ts"]))] = message
        return parent

    def text_of(self, channel: str, ts: str) -> str | None:
        """What the message shows now; None once deleted (or never there)."""
        message = self.messages.get((channel, ts))
        return None if message is None else str(message.get("text", ""))

    def thread_texts(self, channel: str, thread_ts: str) -> list[str]:
        """The bot's replies in a thread as they show now, oldest first."""
        return [
            str(m.get("text", ""))
            for m in self.threads.get((channel, thread_ts), [])
            if m.get("ts") != thread_ts and m.get("bot_id") == self.bot_id
        ]

    def is_streaming(self, channel: str, ts: str) -> bool:
        return self._stream_state((channel, ts)) is not None

    def end_stream(self, channel: str, ts: str, error: str = "stopped_by_user") -> None:
        """End a stream from Slack's side: later appends and stops answer ``error``."""
        stream = self._streams.get((channel, ts))
        if stream is not None:
            stream.ended = error

    def timeout_detail(self) -> str:
        return f"last calls: {[c.method for c in self.calls[-15:]]}"

    # -- Socket Mode -------------------------------------------------------------------------

    async def push(self, payload: dict[str, Any], *, kind: str = "events_api") -> str:
        """Send one Socket Mode envelope on the open socket; returns its envelope_id."""
        await self.wait_for(lambda: self._socket is not None)
        assert self._socket is not None
        envelope_id = f"env-{next_id()}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        await self._socket.send_text(json.dumps(envelope))
        return envelope_id

    async def push_event(self, event: dict[str, Any], **kw: Any) -> str:
        return await self.push(event_callback(event, **kw))

    async def drop_socket(self) -> None:
        """Close the current socket from the server side, as Slack does on a refresh."""
        socket, self._socket = self._socket, None
        if socket is not None:
            with contextlib.suppress(Exception):
                await socket.close(code=1001)

    async def _socket_endpoint(self, ws: WebSocket) -> None:
        await ws.accept()
        self._socket = ws
        self.socket_connections += 1
        self.changed()
        await ws.send_text(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "debug_info": {"host": "fake", "approximate_connection_time": 3600},
                    "connection_info": {"app_id": "A1"},
                }
            )
        )
        try:
            while True:
                raw = await ws.receive_text()
                data = json.loads(raw)
                if isinstance(data, dict) and "envelope_id" in data:
                    self.acks[str(data["envelope_id"])] = data
                    self.changed()
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            if self._socket is ws:
                self._socket = None
            self.changed()

    # -- Web API -------------------------------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        args: dict[str, Any] = dict(request.query_params)
        body = await request.body()
        if body:
            if request.headers.get("content-type", "").startswith("application/json"):
                args.update(json.loads(body))
            else:
                args.update(dict(urllib.parse.parse_qsl(body.decode())))
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        token = token or str(args.get("token", ""))
        self.calls.append(ApiCall(method, args, token, time.monotonic()))
        self.changed()
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if self.revoked:
            return _error("token_revoked")
        if token != expected:
            return _error("invalid_auth")
        if self.latency.get(method):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), self.latency[method])  # ends on stop
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        queued = self._failures.get(method)
        failure = queued.popleft() if queued else None
        if failure is not None and failure.hang is None and not failure.after_posting:
            return _failure_response(failure)
        if handler is None:
            return _error("unknown_method")
        result: dict[str, Any] = handler(args)
        self.changed()
        if failure is not None and failure.after_posting:
            return _failure_response(failure)
        if failure is not None and failure.hang is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), failure.hang)  # ends on stop
        return JSONResponse({"ok": True, **result} if "error" not in result else result)

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "loopgate",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/socket-mode?ticket={next_id()}"}

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel", ""))
        text = str(args.get("text") or args.get("markdown_text") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not text:
            return {"ok": False, "error": "no_text"}
        thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        message = self._add_message(channel, text, thread_ts)
        self.posts.append(Post(channel, text, thread_ts, message["ts"]))
        return {"channel": channel, "ts": message["ts"], "message": message}

    def _add_message(self, channel: str, text: str, thread_ts: str | None) -> dict[str, Any]:
        ts = next_ts()
        message = {"type": "message", "user": self.bot_user_id, "bot_id": self.bot_id}
        message |= {"text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
            self.threads.setdefault((channel, thread_ts), []).append(message)
            # Slack clears an assistant thread's status when the app replies in it.
            if self.statuses.get((channel, thread_ts)):
                self.statuses[(channel, thread_ts)] = ""
        else:
            self.history.setdefault(channel, []).append(message)
        self.messages[(channel, ts)] = message
        self.message_history[(channel, ts)] = [text] if text else []
        return message

    def _show(self, key: tuple[str, str], text: str) -> None:
        self.messages[key]["text"] = text
        self.message_history.setdefault(key, []).append(text)

    def _own_message(self, args: dict[str, Any], refusal: str) -> tuple[str, str] | dict[str, Any]:
        """The (channel, ts) of a message of ours the call names, or the error to answer."""
        key = (str(args.get("channel") or ""), str(args.get("ts") or ""))
        if not key[0]:
            return {"ok": False, "error": "channel_not_found"}
        message = self.messages.get(key)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("bot_id") != self.bot_id:
            return {"ok": False, "error": refusal}
        return key

    # -- files_upload_v2: get an upload URL, POST the bytes there, complete ------------------

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        filename = str(args.get("filename") or "")
        length = str(args.get("length") or "")
        if not filename or not length.isdigit() or int(length) <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{next_id()}"
        self._uploads[file_id] = _PendingUpload(filename, int(length))
        url = f"http://127.0.0.1:{self.port}/upload/v1/{file_id}"
        return {"upload_url": url, "file_id": file_id}

    async def _upload(self, request: Request) -> Response:
        pending = self._uploads.get(request.path_params["file_id"])
        if pending is None:
            return Response("not found", status_code=404)
        data = await request.body()
        if len(data) != pending.length:  # the length announced in getUploadURLExternal
            return Response("length mismatch", status_code=400)
        pending.data = data
        self.changed()
        return Response(f"OK - {len(data)}", media_type="text/plain")

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        items = json.loads(str(args.get("files") or "[]"))
        channel = str(args.get("channel_id") or "")
        thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        comment = str(args.get("initial_comment") or "")
        if not items:
            return {"ok": False, "error": "invalid_arguments"}
        for item in items:
            pending = self._uploads.get(str(item.get("id")))
            if pending is None or pending.data is None:
                return {"ok": False, "error": "file_not_found"}
        message = self._add_message(channel, comment, thread_ts) if channel else None
        done = []
        for item in items:
            file_id = str(item["id"])
            pending = self._uploads.pop(file_id)
            assert pending.data is not None
            title = str(item.get("title") or pending.filename)
            info: dict[str, Any] = {
                "id": file_id,
                "name": pending.filename,
                "title": title,
                "size": len(pending.data),
            }
            if message is not None:
                share: dict[str, Any] = {"ts": message["ts"]}
                if thread_ts:
                    share["thread_ts"] = thread_ts
                scope = "private" if channel.startswith(("D", "G")) else "public"
                info["shares"] = {scope: {channel: [share]}}
                self.files.append(
                    SharedFile(
                        file_id,
                        pending.filename,
                        title,
                        pending.data,
                        channel,
                        thread_ts,
                        comment,
                        message["ts"],
                    )
                )
            done.append(info)
        return {"files": done}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._own_message(args, "cant_update_message")
        if isinstance(found, dict):
            return found
        text, markdown = args.get("text"), args.get("markdown_text")
        if markdown is not None and (text is not None or args.get("blocks")):
            return {"ok": False, "error": "markdown_text_conflict"}
        new = str(markdown if markdown is not None else text or "")
        if not new:
            return {"ok": False, "error": "no_text"}
        if len(new) > (MARKDOWN_LIMIT if markdown is not None else UPDATE_TEXT_LIMIT):
            return {"ok": False, "error": "msg_too_long"}
        if self._stream_state(found) is not None:
            return {"ok": False, "error": "streaming_state_conflict"}
        self._show(found, new)
        return {"channel": found[0], "ts": found[1], "text": new}

    def _m_chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._own_message(args, "cant_delete_message")
        if isinstance(found, dict):
            return found
        message = self.messages.pop(found)
        self._streams.pop(found, None)
        thread_ts = message.get("thread_ts")
        siblings = (
            self.threads.get((found[0], str(thread_ts)), [])
            if thread_ts
            else self.history.get(found[0], [])
        )
        siblings[:] = [m for m in siblings if m is not message]
        self.deleted.append(found)
        return {"channel": found[0], "ts": found[1]}

    # -- streams: chat.startStream / appendStream / stopStream ---------------------------------

    def _stream_state(self, key: tuple[str, str]) -> _Stream | None:
        """The open stream of a message; one past its lifetime ends (its text stays)."""
        stream = self._streams.get(key)
        if stream is None:
            return None
        if not stream.ended and time.monotonic() > stream.expires:
            stream.ended = "message_not_in_streaming_state"
        return None if stream.ended else stream

    def _m_chat_startStream(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self.streaming_supported:
            return {"ok": False, "error": self.streaming_error}
        channel = str(args.get("channel") or "")
        thread_ts = str(args.get("thread_ts") or "")
        markdown = str(args.get("markdown_text") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith("D"):  # streams outside a DM name their recipient
            if not args.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
            if not args.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
        if len(markdown) > MARKDOWN_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        message = self._add_message(channel, markdown, thread_ts)
        self._streams[(channel, message["ts"])] = _Stream(time.monotonic() + self.stream_lifetime)
        return {"channel": channel, "ts": message["ts"]}

    def _open_stream(
        self, args: dict[str, Any], *, stopping: bool = False
    ) -> tuple[str, str] | dict[str, Any]:
        key = (str(args.get("channel") or ""), str(args.get("ts") or ""))
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        if self.messages[key].get("bot_id") != self.bot_id:
            return {"ok": False, "error": "message_not_owned_by_app"}
        if self._stream_state(key) is None:
            stream = self._streams.get(key)
            error = stream.ended if stream is not None and not stopping else ""
            return {"ok": False, "error": error or "message_not_in_streaming_state"}
        if len(str(args.get("markdown_text") or "")) > MARKDOWN_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        return key

    def _m_chat_appendStream(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._open_stream(args)
        if isinstance(found, dict):
            return found
        markdown = str(args.get("markdown_text") or "")
        if not markdown:
            return {"ok": False, "error": "markdown_text_required"}
        self._show(found, str(self.messages[found].get("text", "")) + markdown)
        return {"channel": found[0], "ts": found[1]}

    def _m_chat_stopStream(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._open_stream(args, stopping=True)
        if isinstance(found, dict):
            return found
        if markdown := str(args.get("markdown_text") or ""):
            self._show(found, str(self.messages[found].get("text", "")) + markdown)
        del self._streams[found]
        return {"channel": found[0], "ts": found[1], "message": dict(self.messages[found])}

    def _m_reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        name = str(args.get("name"))
        names = self.reactions.setdefault(key, set())
        if name in names:
            return {"ok": False, "error": "already_reacted"}
        names.add(name)
        self.reaction_log.append(("add", *key, name))
        return {}

    def _m_reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        name = str(args.get("name"))
        names = self.reactions.get(key, set())
        if name not in names:
            return {"ok": False, "error": "no_reaction"}
        names.discard(name)
        self.reaction_log.append(("remove", *key, name))
        return {}

    def _m_assistant_threads_setStatus(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = str(args.get("channel_id")), str(args.get("thread_ts"))
        if not channel.startswith("D"):
            return {"ok": False, "error": "channel_not_found"}  # assistant threads live in DMs
        status = str(args.get("status", ""))
        self.statuses[(channel, thread_ts)] = status
        self.status_log.append((channel, thread_ts, status))
        return {}

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("ts")))
        messages = self.threads.get(key)
        if messages is None:
            return {"ok": False, "error": "thread_not_found"}
        # Like Slack: the parent first, then the replies within oldest/latest, oldest first.
        parent = [m for m in messages if m.get("ts") == key[1]]
        replies = [m for m in messages if m.get("ts") != key[1] and _in_window(m, args)]
        return {"messages": (parent + replies)[: int(args.get("limit", 100))], "has_more": False}

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        messages = [
            m for m in self.history.get(str(args.get("channel")), []) if _in_window(m, args)
        ]
        messages.reverse()  # newest first, like Slack
        return {"messages": messages[: int(args.get("limit", 100))], "has_more": False}

    def _m_conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel"))
        return {"channel": {"id": channel, "is_im": channel.startswith("D")}}

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = str(args.get("user"))
        info = {"id": user, "name": user.lower(), "is_admin": False, "is_owner": False}
        return {"user": {**info, **self.users.get(user, {})}}

    # -- lifecycle -----------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["GET", "POST"]),
                Route("/upload/v1/{file_id}", self._upload, methods=["POST"]),
                WebSocketRoute("/socket-mode", self._socket_endpoint),
            ]
        )

    async def before_stop(self) -> None:
        await self.drop_socket()  # ``closing`` also ends every hang


MARKDOWN_LIMIT = 12_000  # markdown_text per call, and per message on chat.update
UPDATE_TEXT_LIMIT = 4_000  # chat.update's msg_too_long for ``text``


def _error(code: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": code})


def _failure_response(failure: _Failure) -> JSONResponse:
    headers = {"Retry-After": f"{failure.retry_after:g}"} if failure.retry_after else {}
    return JSONResponse({"ok": False, "error": failure.error}, failure.status, headers=headers)


def _in_window(message: dict[str, Any], args: dict[str, Any]) -> bool:
    """Slack's ``oldest`` / ``latest`` (both exclusive unless ``inclusive``)."""
    ts = float(message.get("ts") or 0)
    inclusive = str(args.get("inclusive", "")).lower() in ("1", "true")
    if args.get("oldest"):
        oldest = float(args["oldest"])
        if ts < oldest or (ts == oldest and not inclusive):
            return False
    if args.get("latest"):
        latest = float(args["latest"])
        if ts > latest or (ts == latest and not inclusive):
            return False
    return True
