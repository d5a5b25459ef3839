"""Small in-memory stand-ins for the message path's collaborators (gateway, turn, delivery,
bursts unit tests): a recording channel, a scripted agent (router and loop in one), an
in-memory session resetter, and a SQLite inbox on a temporary file.

Every wait here is on a condition that the fakes notify, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core import RunRequest, RunResult, RunStatus
from bot.agents.router import UnknownAgent
from bot.storage import Database, open_database
from bot.storage.inbox import SqlInbox
from channels import Capabilities, ChatRef, ChatType, InboundMessage, MessageRef, Sender
from channels.local import LocalChannel, Outbound
from tests.waiting import Changes

DM = ChatRef("web", "dm-alice", ChatType.DIRECT)
LOCAL_CHAT = ChatRef("web", "c1")
GROUP = ChatRef("web", "room-1", ChatType.GROUP)


def message(
    text: str,
    *,
    chat: ChatRef = DM,
    sender: str = "alice",
    message_id: str | None = None,
    admin: bool = False,
    addressed: bool = True,
    metadata: dict[str, str] | None = None,
) -> InboundMessage:
    return InboundMessage(
        chat=chat,
        message_id=message_id or uuid.uuid4().hex[:12],
        sender=Sender(sender, sender.title()),
        text=text,
        addressed=addressed,
        sender_is_admin=admin,
        metadata=metadata or {},
    )


@dataclass(frozen=True, slots=True)
class Record:
    kind: str  # "message" | "typing" | "reaction" | "reaction_removed"
    chat: ChatRef
    text: str = ""
    message_id: str = ""
    reply_to: str | None = None


@dataclass(eq=False)
class RecordingChannel:
    """A ``channels.Channel`` that records everything the bot does through it.

    ``failures`` are raised by the next ``send_text`` calls, one each, in order (None lets
    that call through).
    """

    name: str = "web"
    capabilities: Capabilities = field(default_factory=lambda: Capabilities(max_chars=4000))
    admins: set[str] = field(default_factory=set)
    records: list[Record] = field(default_factory=list)
    failures: deque[BaseException | None] = field(default_factory=deque)
    send_attempts: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    changed: Changes = field(default_factory=Changes)

    async def start(self, on_message: Any) -> None:
        pass

    async def stop_receiving(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send_text(
        self, chat: ChatRef, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        self.send_attempts += 1
        if self.failures:
            failure = self.failures.popleft()
            if failure is not None:
                self.changed.notify()
                raise failure
        ref = MessageRef(chat, f"out-{next(self._ids)}")
        await self._record(Record("message", chat, text, ref.message_id, reply_to))
        return ref

    async def set_typing(self, chat: ChatRef) -> None:
        await self._record(Record("typing", chat))

    async def add_reaction(self, message: MessageRef, emoji: str) -> None:
        await self._record(Record("reaction", message.chat, emoji, message.message_id))

    async def remove_reaction(self, message: MessageRef, emoji: str) -> None:
        await self._record(Record("reaction_removed", message.chat, emoji, message.message_id))

    async def is_admin(self, chat: ChatRef, user_id: str) -> bool:
        return user_id in self.admins

    async def _record(self, record: Record) -> None:
        self.records.append(record)
        self.changed.notify()

    # What the tests read.

    def messages(self) -> list[Record]:
        return [r for r in self.records if r.kind == "message"]

    def texts(self) -> list[str]:
        return [r.text for r in self.messages()]

    def kinds(self) -> list[str]:
        return [r.kind for r in self.records]

    def reactions_left(self) -> dict[str, list[str]]:
        """Status emojis still shown, per message id."""
        return reactions_left(self.records)

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 5) -> None:
        await self.changed.wait_for(predicate, timeout)


class Hold:
    """A scripted run that waits until the test releases it (or the run is cancelled)."""

    def __init__(self, content: str = "released") -> None:
        self.content = content
        self.release = asyncio.Event()
        self.cancelled = False


Step = str | RunResult | Hold | BaseException
"""What one run does: answer this text, return this result (its run id replaced), wait for
the test, or raise."""


class FakeAgent:
    """The agent router and its loop in one: ``resolve`` returns itself, ``run`` plays the
    script, one step per run (an answer of ``"ok"`` when the script is empty)."""

    def __init__(self, *steps: Step) -> None:
        self._script: deque[Step] = deque(steps)
        self.requests: list[RunRequest] = []
        self.unknown: set[str] = set()
        self.changed = Changes()

    def script(self, *steps: Step) -> None:
        self._script.extend(steps)

    def asked(self) -> list[str]:
        return [r.message for r in self.requests]

    async def resolve(self, agent_id: str) -> FakeAgent:
        if agent_id in self.unknown:
            raise UnknownAgent(agent_id, ["main"])
        return self

    async def run(self, request: RunRequest) -> RunResult:
        self.requests.append(request)
        self.changed.notify()
        step: Step = self._script.popleft() if self._script else "ok"
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, RunResult):
            return RunResult(
                run_id=request.run_id, status=step.status, content=step.content, error=step.error
            )
        if isinstance(step, Hold):
            try:
                await step.release.wait()
            except asyncio.CancelledError:
                step.cancelled = True
                raise
            step = step.content
        return RunResult(run_id=request.run_id, status=RunStatus.COMPLETED, content=step)

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 5) -> None:
        await self.changed.wait_for(predicate, timeout)


def failed(error: str = "boom") -> RunResult:
    return RunResult(run_id="", status=RunStatus.FAILED, error=error)


class FakeSessions:
    def __init__(self) -> None:
        self.resets: list[str] = []

    async def reset_session(self, session_key: str) -> object:
        self.resets.append(session_key)
        return None


@asynccontextmanager
async def sqlite_db(tmp_path: Path) -> AsyncIterator[Database]:
    async with await open_database(f"sqlite+aiosqlite:///{tmp_path}/inbox.db") as db:
        yield db


@asynccontextmanager
async def sqlite_inbox(tmp_path: Path, **kw: Any) -> AsyncIterator[SqlInbox]:
    async with sqlite_db(tmp_path) as db:
        yield SqlInbox(db, **kw)


async def settled(*futures: asyncio.Future[Any], timeout: float = 5) -> list[Any]:
    return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))


def local_recorder(**caps: object) -> tuple[LocalChannel, list[Outbound]]:
    """The real local channel with these capabilities, and what it sent to ``LOCAL_CHAT``."""
    channel = LocalChannel(capabilities=Capabilities(**caps))  # type: ignore[arg-type]
    records: list[Outbound] = []

    async def record(o: Outbound) -> None:
        records.append(o)

    channel.listen(LOCAL_CHAT.chat_id, record)
    return channel, records


def reactions_left(records: Iterable[Any]) -> dict[str, list[str]]:
    """Status emojis still shown, per message id, from records with ``kind``, ``message_id``
    and ``text`` (a channel's sends, reactions and removals in order)."""
    shown: dict[str, list[str]] = {}
    for r in records:
        if r.kind == "reaction":
            shown.setdefault(r.message_id, []).append(r.text)
        elif r.kind == "reaction_removed":
            shown[r.message_id].remove(r.text)
    return {mid: emojis for mid, emojis in shown.items() if emojis}
