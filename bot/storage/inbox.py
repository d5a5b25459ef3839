"""The durable inbox table: every message that will get a run, from acceptance to its end.

States: ``queued`` → ``running`` → ``answered``, or an end in ``dropped``, ``failed`` or
``expired`` with a reason. ``queued`` and ``running`` are *pending*: a process that starts finds
them and runs them again (``bot/inbox.py``). Each claim carries an owner (this process) and a
lease, so several processes can later share one inbox without a new schema.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.sql.expression import Executable

from bot.redaction import redact
from bot.storage._db import Database
from bot.storage._inbox_entry import (
    ENDED,
    PENDING,
    EntryTakenOver,
    InboxEntry,
    InboxState,
    entry_of,
    process_owner,
)
from bot.storage._inbox_sql import (
    BACKLOG,
    COUNT_PENDING,
    INSERT_ENTRY,
    RETRY_ENTRY,
    UNOWNED_QUEUED,
    accept_statement,
    claim_statement,
    claimable,
    entry_values,
    held_by_or_free,
    is_pending,
    take_over_rows,
    update_entry,
    waiting_elsewhere,
)
from bot.storage._sql import clean, clean_optional
from bot.storage._state import mark_seen, seen_params
from bot.storage.models import InboxRow, utcnow
from channels import InboundMessage

__all__ = ["EntryTakenOver", "InboxEntry", "InboxState", "SqlInbox", "process_owner"]

DEFAULT_LEASE_SECONDS = 60.0
INCREMENT = object()
"""A value of :meth:`SqlInbox._update`: add one to the column."""


class SqlInbox:
    """The ``inbox`` table. Every method is one short transaction."""

    def __init__(
        self,
        db: Database,
        *,
        owner: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self._db = db
        self.owner = owner or process_owner()
        self.lease = timedelta(seconds=lease_seconds)
        self.shared = False
        """Other processes claim entries of this inbox too (``bot/cluster/work.py``)."""
        self._leases: dict[int, datetime] = {}
        """The lease end this process last wrote for each entry it holds. Another process
        takes an entry only once its lease ran out, so within the first half of it a
        :meth:`confirm` needs no round trip."""

    async def add(
        self, msg: InboundMessage, *, session_key: str, agent_id: str, running: bool = False
    ) -> int:
        """Store ``msg`` as ``queued`` (``running`` when it starts at once: one write less);
        returns its id."""
        statement, params = self._insert(msg, session_key, agent_id, running)
        entry_id = await self._db.run_statement(
            lambda conn: int(conn.execute(statement, params).scalar_one())
        )
        self._leases[entry_id] = params["lease_until"]
        return entry_id

    def _insert(
        self,
        msg: InboundMessage,
        session_key: str,
        agent_id: str,
        running: bool,
        owned: bool = True,
        answer: str | None = None,
    ) -> tuple[Executable, dict[str, Any]]:
        # Held by this process from the start: a sweep must not take it over meanwhile.
        # Unowned when several processes share the inbox: whoever holds the session claims
        # it (claim_session), so one chat is answered by one process, in order.
        owner, lease = (self.owner, self.lease) if owned else (None, None)
        values = entry_values(msg, session_key, agent_id, running, owner, lease, answer)
        return INSERT_ENTRY, values

    async def accept(
        self,
        msg: InboundMessage,
        *,
        dedupe_key: str,
        session_key: str,
        agent_id: str,
        running: bool = False,
        owned: bool = True,
        answer: str | None = None,
        behind_waiting: bool = False,
    ) -> int | None:
        """Record ``dedupe_key`` as processed and store ``msg``, in one transaction; None (and
        nothing stored) when the key was processed before: a platform redelivery.
        ``owned`` False stores it for whichever process claims its session. ``answer``: what
        to deliver, without a run (a notice the service itself sends).

        ``behind_waiting``: a message kept by the holder of its session is stored unowned and
        queued instead when an older entry of the session waits for a claim
        (``waiting_elsewhere``), so the claim queues both in order; :meth:`holds` then says
        False for it."""
        seen, seen_with = mark_seen(self._db.dialect), seen_params(dedupe_key)
        insert, params = self._insert(msg, session_key, agent_id, running and owned, owned, answer)
        if self._db.dialect == "postgresql":
            params.update(seen_key=seen_with["key"], seen_at=seen_with["created_at"])
            statement = accept_statement(behind_waiting=behind_waiting and owned)
            row = await self._db.run_statement(
                lambda conn: conn.execute(statement, params).one_or_none()
            )
            if row is None:
                return None
            return self._stored(int(row.id), params["lease_until"] if row.owner else None)

        def accept(conn: Connection) -> int | None:
            if not conn.execute(seen, seen_with).rowcount:
                return None
            if (
                behind_waiting
                and owned
                and conn.execute(select(waiting_elsewhere()), params).scalar()
            ):
                params.update(UNOWNED_QUEUED)
            return int(conn.execute(insert, params).scalar_one())

        entry_id = await self._db.run_write(accept, urgent=True)
        return None if entry_id is None else self._stored(entry_id, params["lease_until"])

    def holds(self, entry_id: int) -> bool:
        """This process stored, claimed or renewed ``entry_id`` as its own (by its own writes)."""
        return entry_id in self._leases

    def _stored(self, entry_id: int, lease_until: datetime | None) -> int:
        if lease_until is not None:
            self._leases[entry_id] = lease_until
        return entry_id

    async def start(self, entry_id: int) -> bool:
        """``running``, owned by this process under a lease. False when another process has
        taken the entry meanwhile (this one lost its lease): it must not be run here."""
        now = utcnow()
        return await self._update(
            entry_id,
            state=InboxState.RUNNING.value,
            attempts=INCREMENT,
            owner=self.owner,
            lease_until=now + self.lease,
            updated_at=now,
        )

    async def save_answer(self, entry_id: int, answer: str) -> bool:
        """Saved before the first chunk is sent: a replay then delivers this, not a new run.
        False when another process holds the entry: send nothing."""
        return await self._update(entry_id, answer=clean(answer), parts=[], updated_at=utcnow())

    async def set_previews(self, entry_id: int, message_ids: list[str]) -> bool:
        """Record the preview messages a streamed answer has posted so far (all of them: the
        list replaces the last one); an empty list once they are gone. False when another
        process holds the entry."""
        return await self._update(entry_id, previews=list(message_ids), updated_at=utcnow())

    async def confirm(self, entry_id: int) -> bool:
        """Whether this process still holds the entry (extending its lease): asked before an
        answer goes out when several processes share the inbox, so a process that lost its
        lease while the model was answering does not send what the new holder sends too.

        Within the first half of the lease this process last wrote for the entry, the answer
        is yes without asking: nobody takes an entry before its lease ran out (by their clock:
        hosts' clocks must agree within half a lease). A process that stalled, or whose last
        write is older, asks the database."""
        now = utcnow()
        held_until = self._leases.get(entry_id)
        if held_until is not None and held_until - now > self.lease / 2:
            return True
        until = now + self.lease
        statement = (
            update(InboxRow)
            .where(InboxRow.id == entry_id, InboxRow.owner == self.owner)
            .values(lease_until=until)
        )
        confirmed = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        if confirmed:
            self._leases[entry_id] = until
        else:
            self._leases.pop(entry_id, None)
        return confirmed > 0

    async def add_part(
        self, entry_id: int, parts: list[str], *, last: bool, answer: str | None = None
    ) -> bool:
        """Record the chunks delivered so far; the last one ends the entry as ``answered``.
        ``answer`` is stored with it when it was not saved before (a one-chunk answer).
        False when another process has taken the entry: send no more of it."""
        values: dict[str, Any] = {"parts": list(parts), "updated_at": utcnow()}
        if answer is not None:
            values["answer"] = clean(answer)
        if last:
            values.update(state=InboxState.ANSWERED.value, owner=None, lease_until=None)
        return await self._update(entry_id, **values)

    async def finish(self, entry_id: int, state: InboxState, reason: str | None = None) -> None:
        """End the entry (``answered``, ``dropped``, ``failed``, ``expired``)."""
        if state in PENDING:
            raise ValueError(f"{state} is not an end state")
        await self._update(
            entry_id,
            state=state.value,
            # A failed run's reason is its error text, which may quote a secret.
            reason=clean_optional(redact(reason) if reason is not None else None),
            owner=None,
            lease_until=None,
            updated_at=utcnow(),
        )

    async def reopen(self, entry_id: int, reason: str) -> None:
        """Make an ended entry pending (``queued``) again, held by this process: a message whose
        cancelled turn is answered by a later one (``bot/pipeline/bursts.py``)."""
        now = utcnow()
        await self._update(
            entry_id,
            state=InboxState.QUEUED.value,
            reason=reason,
            owner=self.owner,
            lease_until=now + self.lease,
            updated_at=now,
        )

    async def release(self, entry_id: int, reason: str) -> None:
        """Give an unfinished entry back (shutdown): the next process runs it again.
        An entry that ended meanwhile stays ended."""
        statement = (
            update(InboxRow)
            .where(
                InboxRow.id == entry_id,
                is_pending(InboxRow.state),
                self._mine_or_free(),
            )
            .values(
                state=InboxState.QUEUED.value,
                reason=reason,
                owner=None,
                lease_until=None,
                updated_at=utcnow(),
            )
        )
        await self._db.run_statement(lambda conn: conn.execute(statement).close())
        self._leases.pop(entry_id, None)

    async def release_queued(self) -> int:
        """Give back what this process holds but never started (a clean stop of one process
        of several): the others claim it at once instead of after the lease."""
        statement = (
            update(InboxRow)
            .where(InboxRow.owner == self.owner, InboxRow.state == InboxState.QUEUED.value)
            .values(owner=None, lease_until=None, updated_at=utcnow())
        )
        released: int = await self._db.run_statement(lambda conn: conn.execute(statement).rowcount)
        return released

    async def take_over(self, *, all_owners: bool = True) -> list[InboxEntry]:
        """Claim the pending entries a previous process left, oldest first.

        One process per inbox (today's deployment) takes every pending entry at start-up,
        whoever owned it: the owner is gone. ``all_owners=False`` (the periodic sweep) takes
        only what nobody holds; several processes claim session by session instead
        (:meth:`claim_session`).
        """
        now = utcnow()
        pending = is_pending(InboxRow.state)
        where = pending if all_owners else claimable(self.owner, now)
        until = now + self.lease
        rows = await self._db.run_write(
            partial(take_over_rows, where=where, owner=self.owner, until=until)
        )
        self._leases.update(dict.fromkeys((row.id for row in rows), until))
        # The rows were read before the update that made them this process's.
        return [replace(entry_of(row), owner=self.owner) for row in rows]

    async def claimable_sessions(self, stored_before: datetime, limit: int = 200) -> list[str]:
        """Sessions with entries nobody holds (new, released, or a dead process's), oldest
        first: what a process of a cluster may claim once it holds the session. Unowned
        entries stored since ``stored_before`` are left to their receiver's claim or nudge."""
        first = func.min(InboxRow.id)
        query = (
            select(InboxRow.session_key, first)
            .where(claimable(self.owner, utcnow(), stored_before))
            .group_by(InboxRow.session_key)
            .order_by(first)
            .limit(limit)
        )
        # Each process's sweep, every third of a lease even when idle: one statement on a plain
        # connection, not an ORM session's three round trips.
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [key for key, _ in rows]

    async def claim_session(self, session_key: str) -> list[InboxEntry]:
        """Take every claimable entry of one session, oldest first, under this process's
        lease. The caller must hold the session (``bot/cluster/work.py``); the row locks
        (``FOR UPDATE SKIP LOCKED`` on Postgres) still keep two claimers from taking one entry
        even if two processes believed they held it. Nothing is claimed while another live
        process holds an entry of the session. One statement (``claim_statement``): this runs
        for most messages a cluster answers (docs/scaling.md, "Cost of the cluster")."""
        entries, _ = await self._claim(session_key, start_first=False)
        return entries

    async def claim_and_start(self, session_key: str) -> tuple[list[InboxEntry], int | None]:
        """:meth:`claim_session`, and the oldest entry claimed also starts (as :meth:`start`)
        when it is a fresh one: for a session with nothing waiting or running here, whose first
        entry runs at once. Returns the entries and the id of the one started, if any."""
        return await self._claim(session_key, start_first=True)

    async def _claim(
        self, session_key: str, *, start_first: bool
    ) -> tuple[list[InboxEntry], int | None]:
        now = utcnow()
        until = now + self.lease
        params = {"key": session_key, "me": self.owner, "now": now, "until": until}
        statement = claim_statement(start_first=start_first)
        rows = await self._db.run_statement(lambda conn: conn.execute(statement, params).all())
        self._leases.update(dict.fromkeys((row.id for row in rows), until))
        started = next((row.id for row in rows if row.started), None)
        return sorted((entry_of(row) for row in rows), key=lambda entry: entry.id), started

    async def renew_leases(self) -> int:
        """Extend the lease of everything this process holds; returns how many."""
        until = utcnow() + self.lease
        statement = (
            update(InboxRow)
            .where(InboxRow.owner == self.owner, is_pending(InboxRow.state))
            .values(lease_until=until)
            .returning(InboxRow.id)
        )
        renewed = await self._db.run_statement(lambda conn: list(conn.execute(statement).scalars()))
        # Only what the database renewed: an entry taken over meanwhile keeps its old end, and
        # one ended while this ran (no longer listed) is not listed again.
        for entry_id in renewed:
            if entry_id in self._leases:
                self._leases[entry_id] = until
        return len(renewed)

    async def get(self, entry_id: int) -> InboxEntry | None:
        query = select(InboxRow).where(InboxRow.id == entry_id)
        row = await self._db.run_read(lambda conn: conn.execute(query).one_or_none())
        return None if row is None else entry_of(row)

    async def retry(self, entry_id: int) -> InboxEntry | None:
        """Queue an entry again for a fresh run (its earlier answer, if any, is forgotten)."""
        params = {"entry_id": entry_id, "now": utcnow()}
        row = await self._db.run_write(lambda conn: conn.execute(RETRY_ENTRY, params).one_or_none())
        return None if row is None else entry_of(row)

    async def unanswered(self, limit: int = 100) -> list[InboxEntry]:
        """Entries that did not end ``answered``, newest first (``loopgate inbox``)."""
        query = (
            select(InboxRow)
            .where(InboxRow.state != InboxState.ANSWERED.value)
            .order_by(InboxRow.id.desc())
            .limit(limit)
        )
        rows = await self._db.run_read(lambda conn: conn.execute(query).all())
        return [entry_of(row) for row in rows]

    async def counts(self) -> dict[str, int]:
        """How many entries are ``queued`` and ``running`` (the inbox depth)."""
        rows = await self._db.run_read(lambda conn: conn.execute(COUNT_PENDING).all())
        found = {state: int(count) for state, count in rows}
        return {state.value: found.get(state.value, 0) for state in PENDING}

    async def backlog(self) -> tuple[dict[str, int], datetime | None]:
        """:meth:`counts`, and when the oldest pending entry was stored (None: none pending),
        in one query (``/metrics``)."""
        rows = await self._db.run_read(lambda conn: conn.execute(BACKLOG).all())
        found = {state: (int(count), oldest) for state, count, oldest in rows}
        counts = {state.value: found.get(state.value, (0, None))[0] for state in PENDING}
        oldest = [when for _, when in found.values() if when is not None]
        return counts, min(oldest) if oldest else None

    async def prune(self, older_than: timedelta = timedelta(days=7)) -> int:
        """Forget ended entries older than ``older_than``; returns how many."""
        cutoff = utcnow() - older_than
        statement = delete(InboxRow).where(
            InboxRow.state.in_([s.value for s in ENDED]), InboxRow.updated_at < cutoff
        )
        removed: int = await self._db.run_write(lambda conn: conn.execute(statement).rowcount)
        return removed

    def _mine_or_free(self) -> Any:
        return held_by_or_free(self.owner)

    async def _update(self, entry_id: int, **values: Any) -> bool:
        """Update one entry unless another process holds it; False then. A value may be
        :data:`INCREMENT` (the column plus one, in SQL)."""
        params = {k: v for k, v in values.items() if v is not INCREMENT}
        statement = update_entry(tuple(k for k, v in values.items() if v is INCREMENT))
        params.update(entry_id=entry_id, me=self.owner)
        changed = await self._db.run_statement(
            lambda conn: conn.execute(statement, params).rowcount
        )
        if not changed or ("lease_until" in values and values["lease_until"] is None):
            self._leases.pop(entry_id, None)  # taken over, ended or given back
        elif values.get("lease_until") is not None:
            self._leases[entry_id] = values["lease_until"]
        return changed > 0
