"""``loopgate chat``: the terminal as one more channel, through the same pipeline."""

from __future__ import annotations

import asyncio
import getpass
import sys
import uuid

from agent_core import Event, EventType, RunResult, RunStatus
from bot.app import Loopgate
from bot.config import Config
from bot.pipeline.session_keys import session_key
from channels import ChatRef, ChatType, InboundMessage, Sender
from channels.local import Outbound


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "local"


async def run_chat(config: Config, message: str | None) -> int:
    """One message (``-m``): print the reply, exit 0. Otherwise an interactive session."""
    user = _user()
    chat = ChatRef(channel="cli", chat_id=f"terminal-{user}", chat_type=ChatType.DIRECT)
    async with Loopgate(config, durable=False) as app:
        replies: list[str] = []

        async def on_outbound(record: Outbound) -> None:
            if record.kind != "message":
                return
            if message is None:
                print(f"\nbot> {record.text}\n", flush=True)
            else:
                replies.append(record.text)

        app.terminal.listen(chat.chat_id, on_outbound)

        def inbound(text: str) -> InboundMessage:
            return InboundMessage(
                chat=chat, message_id=uuid.uuid4().hex, sender=Sender(user, user), text=text
            )

        if message is not None:
            job = await app.gateway.handle(inbound(message))
            result = await job.done if job is not None else None
            for reply in replies:
                print(reply)
            return 1 if result is not None and result.status is RunStatus.FAILED else 0

        key = session_key(app.gateway.agent_for("cli"), chat)

        async def on_event(event: Event) -> None:
            if event.type is EventType.TOOL_CALL:
                print(f"  [tool] {event.payload.get('name')}", flush=True)

        app.events.subscribe(on_event, session_key=key)
        print("Loopgate terminal chat. /stop stops an answer, /help lists commands, Ctrl-D quits.")
        pending: set[asyncio.Future[RunResult | None]] = set()
        while True:
            try:
                line = await asyncio.to_thread(input, "you> ")
            except EOFError:
                # Piped input (`echo hi | loopgate chat`) ends at once: answer before leaving.
                if pending:
                    await asyncio.wait(pending)
                break
            except KeyboardInterrupt:
                break
            if line.strip():
                job = await app.gateway.handle(inbound(line))
                if job is not None:
                    pending.add(job.done)
                    job.done.add_done_callback(pending.discard)
        print(file=sys.stderr)
        return 0
