"""Turning a Telegram ``Update`` into an :class:`~channels.types.InboundMessage`.

What the model gets, in order: a ``[Forwarded from …]`` line, a ``[Replying to …]`` line with the
quoted text (truncated), the text or caption with Telegram entities turned back into markdown,
a note for every attachment we can't read (never a silent drop), and the photo, as an
:class:`~channels.types.Attachment` the bot fetches. The bot's own ``@handle`` is
removed from the text; whether the bot was addressed (mention, ``/cmd@bot``, reply to one of its
messages) is reported in ``addressed`` for group gating.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from telegram import (
    Chat,
    Message,
    MessageEntity,
    MessageOrigin,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
    User,
)

from channels.types import (
    MEDIA_GROUP,
    Attachment,
    ChatRef,
    ChatType,
    InboundMessage,
    Sender,
    attachment_kind,
)

REPLY_CONTEXT_CHARS = 500
_PURE_COMMAND = re.compile(r"^/[A-Za-z0-9_]+(?:@\S+)?\s*$")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """An update that carries nothing for the agent; ``reason`` goes to the log."""

    reason: str
    chat_id: str = ""
    migrate_to_chat_id: int | None = None


def normalize_update(
    update: Update,
    me: BotIdentity,
    *,
    channel: str = "telegram",
    reply_context_chars: int = REPLY_CONTEXT_CHARS,
) -> InboundMessage | Skipped:
    message = update.message
    if message is None:
        if update.edited_message is not None:
            return Skipped("edited_message", str(update.edited_message.chat.id))
        return Skipped("unsupported_update")
    chat = message.chat
    if message.migrate_to_chat_id is not None:
        return Skipped("chat_migrated", str(chat.id), migrate_to_chat_id=message.migrate_to_chat_id)
    if chat.type == Chat.CHANNEL:
        return Skipped("channel_post", str(chat.id))
    user = message.from_user
    if user is not None and user.id == me.id:
        return Skipped("own_message", str(chat.id))
    direct = chat.type == Chat.PRIVATE

    raw_text = message.text if message.text is not None else (message.caption or "")
    entities = message.entities if message.text is not None else message.caption_entities
    body, mentioned = entities_to_markdown(raw_text, entities, me)
    notes = _attachment_notes(message)
    attachments = _attachments(message)
    if not body.strip() and not notes and not attachments:
        return Skipped("service_message", str(chat.id))

    lines: list[str] = []
    reply_text: str | None = None
    if not _PURE_COMMAND.match(body):
        origin = _forward_origin(message.forward_origin)
        if origin:
            lines.append(f"[Forwarded from {origin}]")
        reply = _reply_context(message, me, reply_context_chars)
        if reply is not None:
            author, reply_text = reply
            lines.append(f'[Replying to {author}: "{reply_text}"]')
    if body.strip():
        lines.append(body)
    lines.extend(notes)

    replied = _real_reply(message)
    addressed = (
        direct
        or mentioned
        or (replied is not None and replied.from_user is not None and replied.from_user.id == me.id)
    )
    thread_id = (
        str(message.message_thread_id)
        if chat.is_forum and message.is_topic_message and message.message_thread_id
        else None
    )
    sender_chat = message.sender_chat
    if user is not None:
        sender = Sender(str(user.id), _user_name(user), user.is_bot)
    elif sender_chat is not None:
        sender = Sender(str(sender_chat.id), sender_chat.title or sender_chat.username or "")
    else:
        return Skipped("no_sender", str(chat.id))
    return InboundMessage(
        chat=ChatRef(
            channel, str(chat.id), ChatType.DIRECT if direct else ChatType.GROUP, thread_id
        ),
        message_id=str(message.message_id),
        sender=sender,
        text="\n".join(lines),
        addressed=addressed,
        # An anonymous group admin posts as the group itself.
        sender_is_admin=sender_chat is not None and sender_chat.id == chat.id,
        reply_to_text=reply_text,
        metadata={
            "bot_username": me.username,
            "update_id": str(update.update_id),
            "chat_title": chat.title or "",
            **({MEDIA_GROUP: message.media_group_id} if message.media_group_id else {}),
        },
        attachments=attachments,
    )


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """The files the bot fetches for the agent: a photo in its largest size (Telegram lists the
    sizes smallest first, and always re-encodes photos as JPEG), a document (a picture sent as
    a file is a picture), a voice message, an audio file."""
    found: list[Attachment] = []
    mid = message.message_id
    if message.photo:
        largest = message.photo[-1]
        found.append(
            Attachment(
                kind="image",
                file_id=largest.file_id,
                name=f"photo_{mid}.jpg",
                mime="image/jpeg",
                size=largest.file_size or 0,
            )
        )
    document = message.document
    if document is not None and message.animation is None:  # a GIF keeps its note
        mime = document.mime_type or "application/octet-stream"
        found.append(
            Attachment(
                kind=attachment_kind(mime),
                file_id=document.file_id,
                name=document.file_name or f"document_{mid}",
                mime=mime,
                size=document.file_size or 0,
            )
        )
    if message.voice is not None:
        voice = message.voice
        found.append(
            Attachment(
                kind="audio",
                file_id=voice.file_id,
                name=f"voice_{mid}.ogg",
                mime=voice.mime_type or "audio/ogg",
                size=voice.file_size or 0,
                duration=_seconds(voice.duration),
                voice=True,
            )
        )
    if message.audio is not None:
        audio = message.audio
        found.append(
            Attachment(
                kind="audio",
                file_id=audio.file_id,
                name=audio.file_name or f"audio_{mid}.mp3",
                mime=audio.mime_type or "audio/mpeg",
                size=audio.file_size or 0,
                duration=_seconds(audio.duration),
            )
        )
    return tuple(found)


def _seconds(duration: int | timedelta) -> int:
    # python-telegram-bot gives a timedelta or an int, by its ``PTB_TIMEDELTA`` setting.
    return int(duration.total_seconds()) if isinstance(duration, timedelta) else int(duration)


def entities_to_markdown(
    text: str, entities: Sequence[MessageEntity], me: BotIdentity | None = None
) -> tuple[str, bool]:
    """``text`` with its entities as markdown, and whether ``me`` was addressed.

    Entity offsets count UTF-16 code units. Mentions of the bot are removed; ``/cmd@bot``
    is kept (the command parser reads it) but counts as addressing the bot.
    """
    units = text.encode("utf-16-le")
    ordered = sorted(entities, key=lambda e: (e.offset, -e.length))
    state = {"addressed": False, "dropped": False}
    rendered = _render(units, 0, len(units) // 2, ordered, me, state)
    if state["dropped"]:
        rendered = re.sub(r"[ \t]{2,}", " ", rendered).strip()
    return rendered, state["addressed"]


def _slice(units: bytes, start: int, end: int) -> str:
    return units[start * 2 : end * 2].decode("utf-16-le", errors="replace")


def _render(
    units: bytes,
    start: int,
    end: int,
    entities: list[MessageEntity],
    me: BotIdentity | None,
    state: dict[str, bool],
) -> str:
    out: list[str] = []
    pos = start
    index = 0
    while index < len(entities):
        entity = entities[index]
        e_start, e_end = entity.offset, entity.offset + entity.length
        if e_start < pos or e_end > end:  # overlaps a previous entity: keep its text plain
            index += 1
            continue
        out.append(_slice(units, pos, e_start))
        inner = [e for e in entities[index + 1 :] if e.offset >= e_start and e.offset < e_end]
        content = _render(units, e_start, e_end, inner, me, state)
        out.append(_wrap(entity, content, _slice(units, e_start, e_end), me, state))
        pos = e_end
        index += 1
        while index < len(entities) and entities[index].offset < e_end:
            index += 1
    out.append(_slice(units, pos, end))
    return "".join(out)


def _wrap(
    entity: MessageEntity,
    content: str,
    raw: str,
    me: BotIdentity | None,
    state: dict[str, bool],
) -> str:
    kind = entity.type
    if me is not None:
        if kind == MessageEntity.MENTION and raw[1:].lower() == me.username.lower():
            state["addressed"] = state["dropped"] = True
            return ""
        if kind == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == me.id:
            state["addressed"] = state["dropped"] = True
            return ""
        if (
            kind == MessageEntity.BOT_COMMAND
            and raw.partition("@")[2].lower() == me.username.lower()
        ):
            state["addressed"] = True
    if kind == MessageEntity.CODE:
        return f"`{raw}`"
    if kind == MessageEntity.PRE:
        fence = "````" if "```" in raw else "```"
        tail = "\n" if raw.endswith("\n") else ""
        return f"{fence}{entity.language or ''}\n{raw.strip(chr(10))}\n{fence}{tail}"
    if kind in (MessageEntity.BLOCKQUOTE, MessageEntity.EXPANDABLE_BLOCKQUOTE):
        return "\n".join(f"> {line}" if line else ">" for line in content.split("\n"))
    markers = {
        MessageEntity.BOLD: ("**", "**"),
        MessageEntity.ITALIC: ("*", "*"),
        MessageEntity.STRIKETHROUGH: ("~~", "~~"),
    }
    if kind in markers and content.strip():
        # "** x **" is not bold in markdown: keep the spaces outside the markers.
        core = content.strip()
        lead = content[: len(content) - len(content.lstrip())]
        trail = content[len(content.rstrip()) :]
        left, right = markers[kind]
        return f"{lead}{left}{core}{right}{trail}"
    if kind == MessageEntity.TEXT_LINK and entity.url:
        return f"[{content}]({entity.url})"
    return content


def _user_name(user: User) -> str:
    return user.full_name or (f"@{user.username}" if user.username else str(user.id))


def _forward_origin(origin: MessageOrigin | None) -> str | None:
    if origin is None:
        return None
    if isinstance(origin, MessageOriginUser):
        return _user_name(origin.sender_user)
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat):
        return origin.sender_chat.title or "a chat"
    if isinstance(origin, MessageOriginChannel):
        return origin.chat.title or "a channel"
    return "someone"


def _real_reply(message: Message) -> Message | None:
    """The replied-to message, unless it is only the forum topic's root.

    In a forum topic every message "replies" to the topic-creation service message; that is
    not a reply to anyone, least of all to the bot.
    """
    reply = message.reply_to_message
    if reply is None or reply.forum_topic_created is not None:
        return None
    if message.is_topic_message and reply.message_id == message.message_thread_id:
        return None
    return reply


def _reply_context(message: Message, me: BotIdentity, limit: int) -> tuple[str, str] | None:
    reply = _real_reply(message)
    if reply is None:
        return None
    if message.quote is not None and message.quote.text:
        quoted = message.quote.text  # the user selected part of the message to reply to
    else:
        notes = " ".join(_attachment_notes(reply)) or _media_label(reply)
        quoted = reply.text or reply.caption or notes
    quoted = " ".join(quoted.split())
    if len(quoted) > limit:
        quoted = quoted[: max(0, limit - 1)].rstrip() + "…"
    author = reply.from_user
    if author is None:
        name = reply.sender_chat.title if reply.sender_chat and reply.sender_chat.title else "?"
    elif author.id == me.id:
        name = "you (the assistant)"
    else:
        name = _user_name(author)
    return name, quoted


def _media_label(message: Message) -> str:
    """What a replied-to message without text carried, in a word."""
    if message.photo:
        return "[photo]"
    if message.voice is not None:
        return "[voice message]"
    if message.audio is not None:
        return "[audio file]"
    if message.document is not None:
        return f"[file: {message.document.file_name or 'unnamed'}]"
    return ""


def _attachment_notes(message: Message) -> list[str]:
    """A note per attachment: the model can't see it, but it must know it was there."""
    kinds: list[str] = []
    if message.animation is not None:  # Telegram also sets ``document`` for a GIF
        kinds.append("a GIF")
    if message.video is not None:
        kinds.append("a video")
    if message.video_note is not None:
        kinds.append("a video message")
    if message.sticker is not None:
        kinds.append(f"a sticker {message.sticker.emoji or ''}".rstrip())
    if message.location is not None and message.venue is None:
        loc = message.location
        kinds.append(f"a location ({loc.latitude:.5f}, {loc.longitude:.5f})")
    if message.venue is not None:
        kinds.append(f"a venue ({message.venue.title}, {message.venue.address})")
    if message.contact is not None:
        contact = message.contact
        kinds.append(f"a contact ({contact.first_name} {contact.last_name or ''})".strip())
    if message.poll is not None:
        kinds.append(f"a poll ({message.poll.question})")
    if message.dice is not None:
        kinds.append(f"a dice roll ({message.dice.emoji} {message.dice.value})")
    return [
        f"[The user sent {kind}; attachments can't be read here, only text and captions.]"
        for kind in kinds
    ]
