"""Who may talk to the agent: group and DM policies, and DM pairing. Channel-agnostic.

Checked by the gateway after commands (so ``/stop`` always works) and before the queue.

Groups (``channels.<name>.group_policy``):

- ``mention`` (default): only messages that address the bot (``@bot``, ``/cmd@bot``, a reply
  to one of its messages). The adapter decides what "addressed" means on its platform.
- ``open``: every message in every group.
- ``allowlist``: like ``mention``, but only in the groups listed in ``group_allow_from``.
- ``disabled``: never in groups.

Direct messages (``channels.<name>.dm_policy``):

- ``open`` (default): anyone.
- ``allowlist``: only users in ``allow_from`` (and the admins).
- ``pairing``: users in ``allow_from``, admins, and users the operator approved with
  ``loopgate pairing approve CODE``; anyone else gets a one-time code (8 characters from an
  alphabet without look-alikes, valid 60 minutes, at most 3 pending per channel).
- ``disabled``: no DMs.

Channels without a config section (the local web/CLI chat) only need ``addressed``.
Every refusal is logged as ``inbound.skipped`` with its ``reason``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy import delete, select

from bot.config import Config
from bot.storage import Database, SqlChannelState
from bot.storage.models import ChannelStateRow, utcnow
from channels import Channel, ChatType, InboundMessage

log = structlog.get_logger(__name__)

PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L look-alikes
PAIRING_CODE_LENGTH = 8
PAIRING_TTL = timedelta(minutes=60)
PAIRING_MAX_PENDING = 3
_PENDING = "pairing.pending:"
_APPROVED = "pairing.approved:"

PAIRING_REPLY = (
    "Hi! I don't know you yet. Your pairing code is {code}.\n"
    "Ask the operator of this bot to run: loopgate pairing approve {code}\n"
    "(the code is valid for 60 minutes)"
)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""
    reply: str | None = None
    """Sent to the user when set (e.g. the pairing code)."""


ALLOW = Decision(True)


@dataclass(frozen=True, slots=True)
class PairingRequest:
    channel: str
    code: str
    user_id: str
    name: str
    created_at: datetime

    @property
    def expires_at(self) -> datetime:
        return self.created_at + PAIRING_TTL


def new_pairing_code() -> str:
    return "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(PAIRING_CODE_LENGTH))


class PairingStore:
    """Pending codes and approved users, kept in the ``channel_state`` table.

    Rows: ``pairing.pending:{CODE}`` → JSON request, ``pairing.approved:{user_id}`` → when.
    """

    def __init__(self, db: Database, clock: Callable[[], datetime] = utcnow) -> None:
        self._db = db
        self._state = SqlChannelState(db)
        self._clock = clock

    async def is_approved(self, channel: str, user_id: str) -> bool:
        return await self._state.get(channel, _APPROVED + user_id) is not None

    async def request(self, channel: str, user_id: str, name: str = "") -> PairingRequest | None:
        """The user's pending code (a new one if needed); None when too many are pending."""
        pending = await self.pending(channel)
        for existing in pending:
            if existing.user_id == user_id:
                return existing
        if len(pending) >= PAIRING_MAX_PENDING:
            return None
        codes = {p.code for p in pending}
        code = new_pairing_code()
        while code in codes:
            code = new_pairing_code()
        request = PairingRequest(channel, code, user_id, name, self._clock())
        value = json.dumps(
            {"user_id": user_id, "name": name, "created_at": request.created_at.isoformat()}
        )
        await self._state.set(channel, _PENDING + code, value)
        return request

    async def pending(self, channel: str | None = None) -> list[PairingRequest]:
        """Unexpired pending requests (expired ones are deleted on the way)."""
        query = select(ChannelStateRow).where(ChannelStateRow.key.startswith(_PENDING))
        if channel is not None:
            query = query.where(ChannelStateRow.channel == channel)
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        now = self._clock()
        live: list[PairingRequest] = []
        for row in rows:
            request = _parse(row.channel, row.key.removeprefix(_PENDING), row.value)
            if request is None or request.expires_at <= now:
                await self._delete(row.channel, row.key)
            else:
                live.append(request)
        return sorted(live, key=lambda r: r.created_at)

    async def approve(self, code: str) -> PairingRequest | None:
        """Approve a pending code (any channel); None when unknown or expired."""
        code = code.strip().upper()
        for request in await self.pending():
            if request.code == code:
                await self._state.set(
                    request.channel, _APPROVED + request.user_id, self._clock().isoformat()
                )
                await self._delete(request.channel, _PENDING + code)
                log.info("pairing.approved", channel=request.channel, user=request.user_id)
                return request
        return None

    async def _delete(self, channel: str, key: str) -> None:
        statement = delete(ChannelStateRow).where(
            ChannelStateRow.channel == channel, ChannelStateRow.key == key
        )
        await self._db.run_statement(lambda conn: conn.execute(statement).close())


def _parse(channel: str, code: str, value: str) -> PairingRequest | None:
    try:
        data = json.loads(value)
        return PairingRequest(
            channel,
            code,
            str(data["user_id"]),
            str(data.get("name", "")),
            datetime.fromisoformat(data["created_at"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


class AccessPolicy:
    def __init__(self, config: Config, pairing: PairingStore | None = None) -> None:
        self.config = config
        self.pairing = pairing

    async def check(self, msg: InboundMessage) -> Decision:
        channel = msg.chat.channel
        section = getattr(self.config.channels, channel, None)
        if section is None:  # local web/CLI chat: no policy section, only addressing
            return ALLOW if msg.addressed else Decision(False, "not_addressed")
        if msg.chat.chat_type is ChatType.GROUP:
            return self._group(msg, section.group_policy, section.group_allow_from)
        return await self._direct(msg, section.dm_policy, section.allow_from, section.admins)

    def _group(self, msg: InboundMessage, policy: str, allowed_groups: list[str]) -> Decision:
        if policy == "disabled":
            return Decision(False, "group_disabled")
        if policy == "open":
            return ALLOW
        if policy == "allowlist" and not _listed(
            msg.chat.channel, msg.chat.chat_id, allowed_groups
        ):
            return Decision(False, "group_not_allowed")
        # Mention gating; "not_mentioned" is the usual privacy-mode confusion (see README).
        return ALLOW if msg.addressed else Decision(False, "not_mentioned")

    async def _direct(
        self, msg: InboundMessage, policy: str, allow_from: list[str], admins: list[str]
    ) -> Decision:
        if policy == "open":
            return ALLOW
        channel, sender = msg.chat.channel, msg.sender.id
        if _listed(channel, sender, [*allow_from, *admins, *self.config.bot.admins]):
            return ALLOW
        if policy == "disabled":
            return Decision(False, "dm_disabled")
        if policy == "allowlist":
            return Decision(False, "dm_not_allowed")
        if self.pairing is None:
            return Decision(False, "pairing_unavailable")
        if await self.pairing.is_approved(channel, sender):
            return ALLOW
        request = await self.pairing.request(channel, sender, msg.sender.name)
        if request is None:
            return Decision(False, "pairing_full")
        log.info("pairing.requested", channel=channel, user=sender, code=request.code)
        return Decision(False, "pairing_pending", PAIRING_REPLY.format(code=request.code))


def _listed(channel: str, value: str, entries: list[str]) -> bool:
    return value in entries or f"{channel}:{value}" in entries


def configured_admin(config: Config, msg: InboundMessage, channel: str) -> bool:
    """The sender is listed in ``bot.admins`` or ``channels.<name>.admins`` (``id`` or
    ``channel:id``)."""
    sender = msg.sender.id
    channel_admins = getattr(getattr(config.channels, channel, None), "admins", [])
    admins = {*config.bot.admins, *channel_admins}
    return sender in admins or f"{channel}:{sender}" in admins


async def is_admin(config: Config, msg: InboundMessage, channel: Channel) -> bool:
    """May stop anyone's run here: everyone in a direct chat, configured admins, and the
    chat's admins as the platform tells (a failed lookup counts as no)."""
    if msg.chat.chat_type is ChatType.DIRECT or msg.sender_is_admin:
        return True
    if configured_admin(config, msg, channel.name):
        return True
    try:
        return await channel.is_admin(msg.chat, msg.sender.id)
    except Exception as exc:
        log.info("admin_check.failed", channel=channel.name, error=str(exc))
        return False
