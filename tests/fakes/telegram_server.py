"""A real-HTTP fake of the Telegram Bot API, for tests.

It listens on 127.0.0.1 (a free port) inside the test's event loop and answers
``POST /bot{token}/{method}`` like Telegram: ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": ..., "description": ...}``. python-telegram-bot talks to it through
``base_url``. It is strict where Telegram is: ``sendMessage`` with ``parse_mode=HTML`` rejects
unsupported or unbalanced tags and unknown entities ("can't parse entities",
:mod:`tests.fakes.telegram_html`), and any text longer than 4096 UTF-16 units after parsing
("message is too long"). ``editMessageText``, ``deleteMessage`` and ``sendMessageDraft`` behave
like Telegram's too ("message is not modified", "message to delete not found", drafts in private
chats only); ``sendDocument`` and ``sendPhoto`` take a ``multipart/form-data`` upload (the file
arrives as an :class:`Upload`) under Telegram's limits (50 MB, a 10 MB photo, a caption of 1,024
UTF-16 units). Every state a user could have seen is recorded: ``message_history`` (each bot
message's visible text, from the send through every edit) and ``drafts`` (each draft preview)::

    async with FakeTelegram() as tg:
        tg.push(tg.private_message("hi", user_id=42))          # next getUpdates returns it
        tg.fail_next("sendMessage", 429, retry_after=1)        # injected failures
        tg.hold("sendMessage", after=2)                         # the 3rd hangs till release()
        tg.unknown_methods.add("sendMessageDraft")              # an older Bot API server: 404
        await tg.wait_for(lambda: tg.sent)                      # condition waits, no sleeps
        assert tg.sent[0]["text"] == "echo: hi"

Every call is recorded in ``tg.calls`` as :class:`Call` (method, decoded params, time), except
held ones, which are in ``tg.held``.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import FakeServer
from tests.fakes.telegram_html import HtmlError, parse_html

__all__ = ["Call", "Failure", "FakeTelegram", "Hold", "Upload"]

TOKEN = "123456:TEST-token"
MAX_TEXT_UNITS = 4096
MAX_CAPTION_UNITS = 1024
MAX_PHOTO_BYTES = 10_000_000
MAX_DOCUMENT_BYTES = 50_000_000
_JSON_PARAMS = {"reply_parameters", "allowed_updates", "reaction", "commands", "reply_markup"}
_INT_PARAMS = {
    "chat_id",
    "message_thread_id",
    "offset",
    "timeout",
    "limit",
    "message_id",
    "user_id",
    "draft_id",
}
# The emoji a bot may react with (Telegram rejects others with REACTION_INVALID).
ALLOWED_REACTIONS = {
    *"👍👎❤🔥🥰👏😁🤔🤯😱🤬😢🎉🤩🤮💩🙏👌🕊🤡🥱🥴😍🐳🌚🌭💯🤣⚡🍌🏆💔🤨😐",
    *"🍓🍾💋🖕😈😴😭🤓👻👀🎃🙈😇😨🤝✍🤗🫡🎅🎄☃💅🤪🗿🆒💘🙉🦄😘💊🙊😎👾🤷😡",
    "👨‍💻",
    "❤‍🔥",
}
# HTML tags that make the same entity (Telegram compares entities, not tags).
_TAG_ALIASES = {"strong": "b", "em": "i", "ins": "u", "strike": "s", "del": "s"}
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>")
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    client_port: int | None = None
    """The caller's TCP port: which process made the call (``benchmarks/chaos.py``)."""


@dataclass
class Hold:
    """Let ``after`` more calls of ``method`` through, then hold the next ``count`` ones."""

    method: str
    after: int
    count: int


@dataclass
class Failure:
    """An injected error answer for the next ``count`` calls of ``method`` (that ``match``)."""

    method: str
    status: int
    description: str
    retry_after: int | None = None
    migrate_to_chat_id: int | None = None
    count: int = 1
    match: Callable[[dict[str, Any]], bool] | None = None


@dataclass
class SentMessage:
    """A message the bot sent, as Telegram holds it now."""

    chat_id: int
    message_id: int
    text: str
    """The visible text (markup parsed away)."""
    entities: tuple[tuple[str, str, int, int], ...]
    """(tag, attributes, start, end) of each formatted span: with ``text``, what Telegram
    compares to say "message is not modified"."""
    thread_id: int | None = None
    deleted: bool = False


class ApiError(Exception):
    def __init__(self, status: int, description: str, **parameters: Any) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = {k: v for k, v in parameters.items() if v is not None}


class FakeTelegram(FakeServer):
    name = "FakeTelegram"
    graceful_shutdown = 2

    def __init__(
        self, *, token: str = TOKEN, bot_id: int = 999, bot_username: str = "loopgate_bot"
    ) -> None:
        super().__init__()
        self.token = token
        self.bot_id = bot_id
        self.bot_username = bot_username
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.webhook: dict[str, Any] | None = None
        self.admins: dict[int, set[int]] = {}
        self.delays: dict[str, float] = {}
        self._failures: list[Failure] = []
        self._holds: list[Hold] = []
        self.held: list[Call] = []
        self._released = asyncio.Event()
        self._next_update_id = 1000
        self._next_message_id = 500
        self.messages: dict[tuple[int, int], SentMessage] = {}
        self.message_history: dict[tuple[int, int], list[str]] = {}
        """(chat_id, message_id) → every visible text of a bot message: sent, then each edit."""
        self.drafts: dict[tuple[int, int], list[str]] = {}
        """(chat_id, draft_id) → every text a draft preview showed, in order."""
        self.unknown_methods: set[str] = set()
        """Methods answered 404 "Not Found", as by a Bot API server that predates them."""
        self.files: dict[str, tuple[str, bytes]] = {}
        """file_id → (file_path, bytes): what ``getFile`` and the file URL serve."""
        self.file_downloads: list[str] = []
        """The file_path of every download, in order."""
        self.photo_dimensions_invalid = False
        """``sendPhoto`` refuses every picture's dimensions (as for a 20,000 px panorama)."""

    # -- lifecycle -------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._api, methods=["POST", "GET"]),
                Route("/file/bot{token}/{file_path:path}", self._file, methods=["GET"]),
            ]
        )

    async def before_stop(self) -> None:
        self.release()  # held calls answer; ``closing`` ends pending long polls

    def timeout_detail(self) -> str:
        return f"last calls: {[c.method for c in self.calls[-15:]]}"

    # -- test API --------------------------------------------------------------------------

    def push(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates; returns its update_id."""
        update_id = self.new_update_id()
        self.updates.append({"update_id": update_id, **update})
        self.changed()
        return update_id

    def new_update_id(self) -> int:
        self._next_update_id += 1
        return self._next_update_id

    def fail_next(
        self,
        method: str,
        status: int,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        migrate_to_chat_id: int | None = None,
        count: int = 1,
        match: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        default = {
            400: "Bad Request",
            403: "Forbidden: bot was blocked by the user",
            429: f"Too Many Requests: retry after {retry_after}",
            500: "Internal Server Error",
            502: "Bad Gateway",
        }.get(status, "Error")
        self._failures.append(
            Failure(
                method,
                status,
                description or default,
                retry_after,
                migrate_to_chat_id,
                count,
                match,
            )
        )

    def hold(self, method: str, *, after: int = 0, count: int = 1) -> None:
        """Let ``after`` more calls of ``method`` through, then hold the next ``count`` ones.

        A held call is neither carried out nor recorded in ``calls`` (it is in ``held``): it
        waits until :meth:`release` (or ``stop``), then answers 502. A client killed while
        one is held never learns whether it went out, as in a crash mid-request.
        """
        self._holds.append(Hold(method, after, count))

    def release(self) -> None:
        """Let every held call answer (502); later calls are held again if a hold remains."""
        self._released.set()
        self._released = asyncio.Event()

    def _take_hold(self, method: str) -> bool:
        for hold in self._holds:
            if hold.method != method or hold.count <= 0:
                continue
            if hold.after > 0:
                hold.after -= 1
                return False
            hold.count -= 1
            return True
        return False

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def uploads(self, method: str) -> list[dict[str, Any]]:
        """Params of every *accepted* upload of ``method`` (sendPhoto, sendDocument); the file
        is an :class:`Upload` under ``photo`` / ``document``."""
        return [c.params for c in self.calls_of(method) if "_message_id" in c.params]

    @property
    def sent(self) -> list[dict[str, Any]]:
        """Params of every *accepted* sendMessage, with the ``message_id`` we returned."""
        return [c.params for c in self.calls_of("sendMessage") if "_message_id" in c.params]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [p["text"] for p in self.sent if chat_id is None or p["chat_id"] == chat_id]

    def visible(self, chat_id: int, message_id: int) -> str | None:
        """The text a user sees in that message now, None once deleted (or never sent)."""
        message = self.messages.get((chat_id, message_id))
        return None if message is None or message.deleted else message.text

    def add_file(self, data: bytes, *, file_path: str | None = None) -> str:
        """Serve ``data`` as a new file; returns its file_id."""
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = (file_path or f"photos/{file_id}.jpg", data)
        return file_id

    def photo(
        self, data: bytes, *, width: int = 1280, height: int = 960, size: int | None = None
    ) -> list[dict[str, Any]]:
        """A message's ``photo`` field: a thumbnail, then the full size serving ``data``
        (``size`` states another file_size than the real one)."""
        thumb = self.add_file(b"thumbnail bytes, not an image")
        full = self.add_file(data)
        stated = len(data) if size is None else size
        return [
            {"file_id": thumb, "file_unique_id": f"u-{thumb}", "width": 90, "height": 67},
            {
                "file_id": full,
                "file_unique_id": f"u-{full}",
                "width": width,
                "height": height,
                "file_size": stated,
            },
        ]

    def voice(self, data: bytes, *, duration: int = 14, size: int | None = None) -> dict[str, Any]:
        """A message's ``voice`` field serving ``data`` (Telegram's voice notes are OGG/Opus)."""
        file_id = self.add_file(data, file_path=f"voice/file_{len(self.files) + 1}.oga")
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "duration": duration,
            "mime_type": "audio/ogg",
            "file_size": len(data) if size is None else size,
        }

    def audio(
        self, data: bytes, *, file_name: str = "song.mp3", duration: int = 185
    ) -> dict[str, Any]:
        """A message's ``audio`` field (a music or sound file) serving ``data``."""
        file_id = self.add_file(data, file_path=f"music/file_{len(self.files) + 1}.mp3")
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "duration": duration,
            "file_name": file_name,
            "mime_type": "audio/mpeg",
            "file_size": len(data),
        }

    def document(
        self, data: bytes, file_name: str, mime_type: str, *, size: int | None = None
    ) -> dict[str, Any]:
        """A message's ``document`` field (any file sent as a file) serving ``data``."""
        file_id = self.add_file(data, file_path=f"documents/file_{len(self.files) + 1}")
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_name": file_name,
            "mime_type": mime_type,
            "file_size": len(data) if size is None else size,
        }

    # -- update builders -------------------------------------------------------------------

    def user(self, user_id: int = 42, first_name: str = "Alice", **extra: Any) -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": first_name, **extra}

    def bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Loopgate",
            "username": self.bot_username,
        }

    def message(
        self,
        text: str | None,
        *,
        chat: dict[str, Any],
        sender: dict[str, Any] | None = None,
        message_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "message_id": message_id or self._new_message_id(),
            "date": int(time.time()),
            "chat": chat,
            "from": sender or self.user(),
            **extra,
        }
        if text is not None:
            msg["text"] = text
        if entities:
            msg["entities"] = entities
        return {"message": msg}

    def private_message(self, text: str | None, *, user_id: int = 42, **kw: Any) -> dict[str, Any]:
        chat = {"id": user_id, "type": "private", "first_name": "Alice"}
        return self.message(text, chat=chat, sender=self.user(user_id), **kw)

    def group_message(
        self,
        text: str | None,
        *,
        chat_id: int = -100777,
        user_id: int = 42,
        first_name: str = "Alice",
        forum: bool = False,
        **kw: Any,
    ) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": "supergroup", "title": "Team"}
        if forum:
            chat["is_forum"] = True
        return self.message(text, chat=chat, sender=self.user(user_id, first_name), **kw)

    def mention(self, text: str) -> list[dict[str, Any]]:
        """A ``mention`` entity for the bot's @handle in ``text``."""
        handle = f"@{self.bot_username}"
        offset = len(text[: text.index(handle)].encode("utf-16-le")) // 2
        return [{"type": "mention", "offset": offset, "length": len(handle)}]

    def _new_message_id(self) -> int:
        self._next_message_id += 1
        return self._next_message_id

    # -- the API ---------------------------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401
            )
        method = request.path_params["method"]
        try:
            body = await request.body()
        except ClientDisconnect:  # a poller cancelled at shutdown
            return Response(status_code=499)
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):  # an upload (sendDocument)
            params = await _decode_multipart(request)
        else:
            params = _decode(body, content_type)
        call = Call(method, params, client_port=request.client.port if request.client else None)
        if self._take_hold(method):
            self.held.append(call)
            released = self._released
            self.changed()
            await released.wait()
            return JSONResponse(
                {"ok": False, "error_code": 502, "description": "Bad Gateway"}, status_code=502
            )
        self.calls.append(call)
        try:
            if method in self.delays:
                await asyncio.sleep(self.delays[method])
            self._inject_failure(method, params)
            handler = getattr(self, f"_m_{method}", None)
            if handler is None or method in self.unknown_methods:
                raise ApiError(404, "Not Found")
            result = await handler(params)
        except ApiError as exc:
            body: dict[str, Any] = {
                "ok": False,
                "error_code": exc.status,
                "description": exc.description,
            }
            if exc.parameters:
                body["parameters"] = exc.parameters
            response: Response = JSONResponse(body, status_code=exc.status)
        else:
            response = JSONResponse({"ok": True, "result": result})
        self.changed()
        return response

    async def _file(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        file_path = request.path_params["file_path"]
        self.file_downloads.append(file_path)
        self.changed()
        for path, data in self.files.values():
            if path == file_path:
                return Response(data, media_type="application/octet-stream")
        return Response(status_code=404)

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    def _inject_failure(self, method: str, params: dict[str, Any]) -> None:
        for failure in self._failures:
            if failure.method != method or failure.count <= 0:
                continue
            if failure.match is not None and not failure.match(params):
                continue
            failure.count -= 1
            raise ApiError(
                failure.status,
                failure.description,
                retry_after=failure.retry_after,
                migrate_to_chat_id=failure.migrate_to_chat_id,
            )

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {
            **self.bot_user(),
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook is not None:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        if offset:  # confirms every update before offset, like Telegram
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)

        def available() -> bool:
            return self.closing.is_set() or any(u["update_id"] >= offset for u in self.updates)

        with contextlib.suppress(TimeoutError):
            await self._changes.wait_for(available, timeout)
        limit = int(params.get("limit") or 100)
        return [u for u in self.updates if u["update_id"] >= offset][:limit]

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = params
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> Any:
        for reaction in params.get("reaction") or []:
            if reaction.get("emoji") not in ALLOWED_REACTIONS:
                raise ApiError(400, "Bad Request: REACTION_INVALID")
        return True

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        plain, entities = _parse_text(params, allow_empty=False)
        message_id = self._new_message_id()
        params["_message_id"] = message_id
        chat_id = int(params["chat_id"])
        thread_id = params.get("message_thread_id") or None
        message = SentMessage(chat_id, message_id, plain, entities, thread_id)
        self.messages[(chat_id, message_id)] = message
        self.message_history[(chat_id, message_id)] = [plain]
        return self._message_json(message)

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        if "inline_message_id" in params:
            raise ApiError(400, "Bad Request: MESSAGE_ID_INVALID")
        key = (int(params.get("chat_id") or 0), int(params.get("message_id") or 0))
        message = self.messages.get(key)
        if message is None or message.deleted:
            raise ApiError(400, "Bad Request: message to edit not found")
        plain, entities = _parse_text(params, allow_empty=False)
        if (plain, entities) == (message.text, message.entities):
            raise ApiError(400, NOT_MODIFIED)
        message.text, message.entities = plain, entities
        self.message_history[key].append(plain)
        return {**self._message_json(message), "edit_date": int(time.time())}

    async def _m_deleteMessage(self, params: dict[str, Any]) -> Any:
        key = (int(params.get("chat_id") or 0), int(params.get("message_id") or 0))
        message = self.messages.get(key)
        if message is None or message.deleted:
            raise ApiError(400, "Bad Request: message to delete not found")
        message.deleted = True
        return True

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        chat_id = int(params.get("chat_id") or 0)
        if chat_id <= 0:  # groups, supergroups and channels have negative ids
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        draft_id = int(params.get("draft_id") or 0)
        if draft_id == 0:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        # An empty text shows a "Thinking..." placeholder (recorded as "").
        plain, _ = _parse_text(params, allow_empty=True)
        self.drafts.setdefault((chat_id, draft_id), []).append(plain)
        return True

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        """An uploaded file: ``params["document"]`` is an :class:`Upload`."""
        document = params.get("document")
        if not isinstance(document, Upload) or not document.data:
            raise ApiError(400, "Bad Request: there is no document in the request")
        if len(document.data) > MAX_DOCUMENT_BYTES:
            raise ApiError(413, "Request Entity Too Large")
        result = self._media_message(params)
        result["document"] = {
            "file_id": f"doc-{result['message_id']}",
            "file_unique_id": f"u-doc-{result['message_id']}",
            "file_name": document.filename,
            "mime_type": document.content_type,
            "file_size": len(document.data),
        }
        return result

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        """An uploaded picture: ``params["photo"]`` is an :class:`Upload` (10 MB at most, and
        dimensions Telegram accepts: :attr:`photo_dimensions_invalid` refuses them)."""
        photo = params.get("photo")
        if not isinstance(photo, Upload) or not photo.data:
            raise ApiError(400, "Bad Request: there is no photo in the request")
        if len(photo.data) > MAX_PHOTO_BYTES:
            raise ApiError(400, "Bad Request: PHOTO_SAVE_FILE_INVALID")
        if self.photo_dimensions_invalid:
            raise ApiError(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        result = self._media_message(params)
        result["photo"] = [
            {
                "file_id": f"photo-{result['message_id']}",
                "file_unique_id": f"u-photo-{result['message_id']}",
                "width": 90,
                "height": 90,
                "file_size": len(photo.data),
            }
        ]
        return result

    def _media_message(self, params: dict[str, Any]) -> dict[str, Any]:
        """The message an upload makes; its caption is checked as Telegram checks it."""
        caption = params.get("caption") or ""
        if len(caption.encode("utf-16-le")) // 2 > MAX_CAPTION_UNITS:
            raise ApiError(400, "Bad Request: message caption is too long")
        chat_id = int(params["chat_id"])
        message_id = self._new_message_id()
        params["_message_id"] = message_id
        chat_type = "private" if chat_id > 0 else "supergroup"
        result: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type},
            "from": self.bot_user(),
        }
        if params.get("message_thread_id"):
            result["message_thread_id"] = params["message_thread_id"]
        if caption:
            result["caption"] = caption
        return result

    def _message_json(self, message: SentMessage) -> dict[str, Any]:
        chat_type = "private" if message.chat_id > 0 else "supergroup"
        result: dict[str, Any] = {
            "message_id": message.message_id,
            "date": int(time.time()),
            "chat": {"id": message.chat_id, "type": chat_type},
            "from": self.bot_user(),
            "text": message.text,
        }
        if message.thread_id:
            result["message_thread_id"] = message.thread_id
        return result

    async def _m_getChatAdministrators(self, params: dict[str, Any]) -> Any:
        return [
            {"status": "creator", "user": self.user(uid, f"Admin{uid}"), "is_anonymous": False}
            for uid in sorted(self.admins.get(int(params["chat_id"]), set()))
        ]

    async def _m_getChatMember(self, params: dict[str, Any]) -> Any:
        uid = int(params["user_id"])
        status = "creator" if uid in self.admins.get(int(params["chat_id"]), set()) else "member"
        member: dict[str, Any] = {"status": status, "user": self.user(uid)}
        if status == "creator":
            member["is_anonymous"] = False
        return member


def _parse_text(
    params: dict[str, Any], *, allow_empty: bool
) -> tuple[str, tuple[tuple[str, str, int, int], ...]]:
    """The visible text and entities of a message's ``text`` as Telegram parses it."""
    text = params.get("text") or ""
    html_mode = params.get("parse_mode") == "HTML"
    try:
        plain = parse_html(text) if html_mode else text
    except HtmlError as exc:
        raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
    if not allow_empty and not plain.strip():
        raise ApiError(400, "Bad Request: message text is empty")
    if len(plain.encode("utf-16-le")) // 2 > MAX_TEXT_UNITS:
        raise ApiError(400, "Bad Request: message is too long")
    return plain, _entities(text) if html_mode else ()


def _entities(markup: str) -> tuple[tuple[str, str, int, int], ...]:
    """The formatted spans of HTML that :func:`parse_html` accepted (empty spans vanish)."""
    spans: list[tuple[str, str, int, int]] = []
    open_tags: list[tuple[str, str, int]] = []
    offset = pos = 0
    for match in _TAG_RE.finditer(markup):
        offset += len(html.unescape(markup[pos : match.start()]))
        pos = match.end()
        tag = _TAG_ALIASES.get(match.group(2).lower(), match.group(2).lower())
        if match.group(1):
            name, attributes, start = open_tags.pop()
            if offset > start:
                spans.append((name, attributes, start, offset))
        else:
            open_tags.append((tag, match.group(3).strip(), offset))
    return tuple(sorted(spans, key=lambda span: (span[2], span[3], span[0])))


@dataclass(frozen=True)
class Upload:
    """A file part of a ``multipart/form-data`` request, as received."""

    filename: str | None
    content_type: str | None
    data: bytes
    disposition: str = ""
    """The part's raw ``Content-Disposition`` (UTF-8): how the client wrote the file name."""


def _decode(body: bytes, content_type: str) -> dict[str, Any]:
    if not body:
        return {}
    if content_type.startswith("application/json"):
        data = json.loads(body)
        return data if isinstance(data, dict) else {}
    params: dict[str, Any] = {}
    for key, value in parse_qsl(body.decode(), keep_blank_values=True):
        params[key] = _typed(key, value)
    return params


async def _decode_multipart(request: Request) -> dict[str, Any]:
    """Plain fields typed as in a form; each file part as an :class:`Upload`."""
    params: dict[str, Any] = {}
    async with request.form() as form:
        for key, value in form.multi_items():
            if isinstance(value, str):
                params[key] = _typed(key, value)
            else:
                raw = value.headers.get("content-disposition", "").encode("latin-1")
                params[key] = Upload(
                    value.filename,
                    value.content_type,
                    await value.read(),
                    raw.decode("utf-8", "replace"),
                )
    return params


def _typed(key: str, value: str) -> Any:
    if key in _JSON_PARAMS:
        return json.loads(value)
    if key in _INT_PARAMS and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value
