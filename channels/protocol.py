"""The one protocol every platform adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response

from channels.errors import ChannelError
from channels.types import Attachment, Capabilities, ChatRef, InboundMessage, MessageRef

InboundHandler = Callable[[InboundMessage], Awaitable[None]]
"""What an adapter calls for every normalized inbound message.

It returns once the message is durably accepted (or deliberately ignored), never after the
answer, so an adapter acknowledges the platform only after it returns. It raises
:class:`~channels.errors.NotAccepted` when the message could not be stored: don't acknowledge.
"""


@runtime_checkable
class Channel(Protocol):
    name: str
    capabilities: Capabilities

    async def start(self, on_message: InboundHandler) -> None:
        """Begin receiving (polling loop, socket...). Webhook adapters only remember the handler."""

    async def stop_receiving(self) -> None:
        """Stop taking new updates (polling ends, a socket closes) while sending still works.

        The first step of a graceful shutdown: updates already fetched are handed over before
        this returns, updates not yet fetched stay with the platform. Idempotent.
        """

    async def stop(self) -> None:
        """Stop receiving and release network resources. Idempotent."""

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """Send one already-formatted chunk (at most ``capabilities.max_chars``)."""

    async def set_typing(self, chat: ChatRef) -> None:
        """Show the typing indicator once; the bot refreshes it while a run lasts."""

    async def add_reaction(self, message: MessageRef, emoji: str) -> None: ...

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None: ...

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        """Whether the platform itself considers this user an admin of the chat."""


@runtime_checkable
class ProgressReporter(Protocol):
    """An adapter that can say in words what the agent is doing (Slack's assistant status).

    Reactions show a state as an emoji; this names it: "is using web_search…".
    """

    def show_progress(self, message: MessageRef, tool: str | None, *, helpers: int = 0) -> None:
        """``tool`` is the tool now running, ``None`` while the model thinks; ``helpers`` the
        agent's child runs still working (spawn, delegate), shown when more than 0. Must not
        block: it is called from the run's event stream, so the adapter schedules the call."""


@runtime_checkable
class MessageEditor(Protocol):
    """An adapter that can change and remove what it sent, so a streamed answer grows in place
    (``bot/pipeline/streaming/``: send the first chunk, then edit it)."""

    async def edit_text(self, message: MessageRef, text: str) -> None:
        """Replace a sent chunk's text by ``text`` (formatted like ``send_text``'s, at most
        ``capabilities.max_chars``), with the same plain-text fallback when the platform
        rejects the markup. An edit to the same text is not an error. May raise
        :class:`~channels.errors.RetryAfter`."""

    async def delete_message(self, message: MessageRef) -> bool:
        """Remove a sent message; False when the platform refuses (too old, not allowed)."""


@runtime_checkable
class SentLookup(Protocol):
    """An adapter that can tell whether a message was posted (Slack: the conversation's
    history). A replay asks it before sending a chunk that a killed process may have sent."""

    async def find_sent(
        self, chat: ChatRef, text: str, *, since: float, reply_to: str | None = None
    ) -> MessageRef | None:
        """This bot's message with exactly ``text`` (as ``send_text`` got it, with the same
        ``reply_to``) posted in ``chat`` after ``since`` (a Unix time); None when there is none.
        Raises :class:`~channels.errors.ChannelError` when it can't look."""
        ...


@runtime_checkable
class FileFetcher(Protocol):
    """An adapter that can download the attachments of the messages it normalized."""

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The file's bytes. Raises :class:`~channels.errors.ChannelError` when the platform
        can't give them (unknown or expired file id, too large for its API)."""
        ...


class StreamUnsupported(ChannelError):
    """The platform refused its native stream for this chat before anything was shown: the
    bot streams by send + edit instead."""


class PlatformStream(Protocol):
    """One answer streamed with the platform's own method (Telegram drafts, Slack chat
    streams). Texts are the bot's safe preview in markdown: never hidden text, never a prefix
    of NO_REPLY; the adapter formats them."""

    @property
    def messages(self) -> list[MessageRef]:
        """The chat messages this stream has posted so far (none for a draft, which is not a
        message): what must be removed if the process dies before the stream ends."""

    async def update(self, text: str) -> None:
        """Show ``text`` (the whole preview so far). The first call may raise
        :class:`StreamUnsupported`."""

    async def finish(self, text: str, *, reply_to: str | None = None) -> list[MessageRef]:
        """End the stream with the final answer (sanitized markdown); returns the messages
        that hold it, in order."""

    async def discard(self, *, marker: str | None = None) -> None:
        """End the stream without an answer: remove the preview, or (``marker`` set) keep the
        text shown so far followed by ``marker`` (e.g. " (stopped)")."""


@runtime_checkable
class NativeStreaming(Protocol):
    """An adapter with a platform streaming method for some chats."""

    def open_stream(self, chat: ChatRef, *, reply_to: str | None = None) -> PlatformStream | None:
        """A stream for one answer in ``chat``, or None where it has none (then send + edit)."""


@runtime_checkable
class WebhookReceiver(Protocol):
    """An adapter that receives platform updates over HTTP on our own server.

    The bot's HTTP server routes ``POST {webhook_path}`` to :meth:`handle_webhook`. The adapter
    verifies the request (secret token, signature), hands the update to the
    :data:`InboundHandler` (which only stores it, so the answer stays fast) and answers after
    it returned: 2xx once the bot has the update, 503 when it raised
    :class:`~channels.errors.NotAccepted` or the channel stopped receiving, so the platform
    delivers it again.
    """

    webhook_path: str

    async def handle_webhook(self, request: Request) -> Response: ...


class StateStore(Protocol):
    """Small persistent key/value state per channel (e.g. a polling offset)."""

    async def get(self, channel: str, key: str) -> str | None: ...

    async def set(self, channel: str, key: str, value: str) -> None: ...


class SeenStore(Protocol):
    """Persistent memory of processed platform ids, so a restart or a retry is not a replay."""

    async def seen(self, key: str) -> bool:
        """Record ``key``; True when it had been recorded before."""

    async def has_seen(self, key: str) -> bool:
        """Whether ``key`` is recorded, without recording it (an adapter looks first and
        records only once the bot has stored the message: a kill in between loses nothing)."""

    async def forget(self, key: str) -> None:
        """Undo :meth:`seen` for an update the bot did not accept, so its redelivery counts."""


class PollGate(Protocol):
    """Whether this process may poll a bot now: with several processes, only one may, or the
    platform sees competing ``getUpdates`` and each update goes to whoever asked first."""

    def holds(self) -> bool:
        """True while this process is the bot's poller."""

    async def wait_turn(self) -> None:
        """Return once this process is the bot's poller (at once when it already is)."""


@dataclass(frozen=True, slots=True)
class PaceBucket:
    """One send budget a send draws on: ``rate`` tokens a second, at most ``burst`` saved up.
    ``name`` is unique within one bot (``chat:<id>``, ``group:<id>``, ``global``)."""

    name: str
    rate: float
    burst: int


class PaceStore(Protocol):
    """Send budgets shared by every process that sends for one bot, so N processes together
    send no faster than one would (bot/cluster keeps them in Redis). A pacer without one keeps
    its buckets in memory."""

    async def take(self, buckets: Sequence[PaceBucket], *, hold: str = "") -> float:
        """Take one token from every bucket, all or none; returns 0 when they were taken, else
        the seconds until all could be (nothing taken). While ``hold`` is on hold nothing is
        taken. Raises when the store is unreachable: the pacer then paces in memory."""

    async def hold(self, name: str, seconds: float) -> None:
        """Grant nothing held under ``name`` for ``seconds`` (the platform's 429 said so)."""


class FileRefused(ChannelError):
    """The platform can't take this file from a bot (too large for its upload limit, an empty
    file): nothing was sent. The message says why, for the agent and the user."""


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file :meth:`FileSending.send_file` put in a chat, and how."""

    message: MessageRef
    how: Literal["photo", "document", "note"]
    """``photo`` (shown as a picture), ``document`` (a file to download), or ``note``: the
    platform can't carry the file, so the chat got a text note naming it instead."""


@runtime_checkable
class FileSending(Protocol):
    """An adapter that can put a file in a chat (the ``send_file`` tool, issue 29)."""

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
        """Send the file at ``path`` (already confined to the workspace by the caller) as
        ``name``, with ``caption`` as plain text, where :meth:`Channel.send_text` would answer
        (``reply_to``: the message answered, for threads). Raises :class:`FileRefused` for a
        file over the platform's limits, before anything is uploaded; other
        :class:`~channels.errors.ChannelError` as sending text does."""
        ...


@runtime_checkable
class FileHost(Protocol):
    """An adapter that offers files at short-lived links on the bot's own server, for a
    platform that fetches what it sends by URL (Zalo's ``sendPhoto``). The bot's server routes
    ``GET {files_path}…`` to :meth:`serve_file` (an empty ``files_path``: none offered)."""

    files_path: str

    async def serve_file(self, request: Request) -> Response:
        """The file a link names, or 404 for a forged, expired or vanished one."""
        ...
