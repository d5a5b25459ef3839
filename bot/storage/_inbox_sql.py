"""The inbox's statements, built once (``functools.cache``) and executed with parameters:
storing an entry (with its dedupe record on Postgres), updating one unless another process
holds it, claiming a session's entries, taking a gone process's over, queueing one again and
counting the pending ones (``bot/storage/inbox.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    bindparam,
    case,
    false,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql.expression import BindParameter, ColumnElement, Executable

from bot.storage._inbox_entry import PENDING, InboxState, message_to_json
from bot.storage._sql import clean, dialect_insert, table_of
from bot.storage.models import InboxRow, ProcessedMessageRow, utcnow
from channels import InboundMessage

TABLE = table_of(InboxRow)
INSERT_ENTRY = insert(TABLE).returning(TABLE.c.id)
ENTRY_COLUMNS = (
    "answer",
    "session_key",
    "agent_id",
    "channel",
    "message",
    "state",
    "attempts",
    "parts",
    "received_at",
    "created_at",
    "updated_at",
    "owner",
    "lease_until",
)
"""What :meth:`bot.storage.inbox.SqlInbox._insert` gives a new entry."""
UNOWNED_QUEUED: dict[str, Any] = {
    "state": InboxState.QUEUED.value,
    "attempts": 0,
    "owner": None,
    "lease_until": None,
}
"""A new entry's columns when it is stored behind an older one waiting for a claim."""


def entry_values(
    msg: InboundMessage,
    session_key: str,
    agent_id: str,
    running: bool,
    owner: str | None,
    lease: timedelta | None,
    answer: str | None,
) -> dict[str, Any]:
    """A new entry's columns (``ENTRY_COLUMNS``): held by ``owner`` for ``lease`` from now, or
    unowned when ``owner`` is None."""
    now = utcnow()
    return {
        "answer": None if answer is None else clean(answer),
        "session_key": session_key,
        "agent_id": agent_id,
        "channel": msg.chat.channel,
        "message": message_to_json(msg),
        "state": (InboxState.RUNNING if running else InboxState.QUEUED).value,
        "attempts": 1 if running else 0,
        "parts": [],
        # When Loopgate took it, not the platform's date: replay_max_age counts the wait
        # here, whatever the platform's clock (the message keeps its own date).
        "received_at": now,
        "created_at": now,
        "updated_at": now,
        "owner": owner,
        "lease_until": None if lease is None else now + lease,
    }


@cache
def accept_statement(*, behind_waiting: bool = False) -> Executable:
    """Postgres: the dedupe record and the entry in one statement (a data-modifying CTE), so
    in one round trip instead of four (``BEGIN``, two inserts, ``COMMIT``); just as atomic.
    The entry is inserted only when the record was: no row back means a redelivery.

    ``behind_waiting``: when a pending entry of the session is unowned or another process's
    (``waiting_elsewhere``), the entry is stored unowned and queued whatever the parameters
    say, so the claim that queues that older one queues this one after it. Returns the id and
    the owner it got."""
    processed = table_of(ProcessedMessageRow)
    seen = (
        dialect_insert("postgresql", processed)
        .values(key=bindparam("seen_key"), created_at=bindparam("seen_at"))
        .on_conflict_do_nothing(index_elements=[processed.c.key])
        .returning(processed.c.key)
        .cte("seen")
    )
    columns: dict[str, Any] = {
        name: bindparam(name, type_=TABLE.c[name].type) for name in ENTRY_COLUMNS
    }
    if behind_waiting:
        waiting = waiting_elsewhere()
        for name, value in UNOWNED_QUEUED.items():
            columns[name] = case((waiting, value), else_=columns[name])
    entry = select(*(column.label(name) for name, column in columns.items()))
    return (
        insert(TABLE)
        .from_select(list(columns), entry.select_from(seen))
        .returning(TABLE.c.id, TABLE.c.owner)
    )


def is_pending(state: Any) -> ColumnElement[bool]:
    """``state IN ('queued', 'running')`` written into the SQL: an IN list of bound values is
    expanded anew at every execution (SQLAlchemy's "post-compile" step), and the claims and a
    kept message's store run these on every message a cluster moves (issue 33). Every inbox
    statement that asks for pending entries says it this way."""
    in_list: ColumnElement[bool] = state.in_([literal_column(f"'{s.value}'") for s in PENDING])
    return in_list


def waiting_elsewhere() -> ColumnElement[bool]:
    """A pending entry of the session (``session_key``) that this process (``owner``) does not
    hold: a message another process received and stored for the session's holder to claim.
    A new message kept here must not overtake it."""
    t = TABLE
    return (
        select(t.c.id)
        .where(
            t.c.session_key == bindparam("session_key"),
            is_pending(t.c.state),
            or_(t.c.owner.is_(None), t.c.owner != bindparam("owner")),
        )
        .exists()
    )


def claimable(owner: str, now: datetime, stored_before: datetime | None = None) -> Any:
    """Pending entries nobody holds: unowned (stored before ``stored_before``, when given),
    or held by another process whose lease ran out."""
    unowned: ColumnElement[bool] = InboxRow.owner.is_(None)
    if stored_before is not None:
        unowned = unowned & (InboxRow.created_at < stored_before)
    expired = (InboxRow.owner != owner) & (InboxRow.lease_until < now)
    return is_pending(InboxRow.state) & or_(unowned, expired)


def held_by_or_free(owner: Any) -> Any:
    # An entry another process holds is its business: a process that lost its lease
    # (stalled past it, cut off from Redis) must not run, deliver or end it as well.
    return or_(TABLE.c.owner == owner, TABLE.c.owner.is_(None))


@cache
def update_entry(incremented: tuple[str, ...]) -> Executable:
    """One entry's UPDATE unless another process holds it, built once per shape: the SET
    clause comes from the parameters' keys at execution, with ``incremented`` columns + 1."""
    table = TABLE
    return (
        update(table)
        .where(table.c.id == bindparam("entry_id"), held_by_or_free(bindparam("me")))
        .values({name: table.c[name] + 1 for name in incremented})
    )


@cache
def claim_statement(*, start_first: bool = False) -> Executable:
    """``claim_session`` as one ``UPDATE … RETURNING``: the session's claimable entries, locked
    with ``FOR UPDATE SKIP LOCKED`` in a CTE as the former ``SELECT … FOR UPDATE`` did
    (under read committed both re-check a row once they lock it), unless a live process holds
    one of its pending entries: it may still be answering the one before them.

    ``start_first``: the oldest of them also starts (``running``, one more attempt) when it is
    a fresh one (no attempt, no answer): what ``SqlInbox.start`` would write a moment later,
    saved a round trip. Each row comes back with ``started``, whether this claim started it:
    ``running`` with ``updated_at`` this claim's own ``now`` (``RETURNING`` shows only the new
    values, and SQLite's can't read the CTE that still has the old attempts)."""
    t = TABLE
    pending = is_pending(t.c.state)
    key: BindParameter[str] = bindparam("key")
    me: BindParameter[str] = bindparam("me")
    now: BindParameter[datetime] = bindparam("now")
    held_elsewhere = (
        select(t.c.id)
        .where(t.c.session_key == key, pending, t.c.owner != me, t.c.lease_until >= now)
        .exists()
    )
    claimable = pending & or_(t.c.owner.is_(None), (t.c.owner != me) & (t.c.lease_until < now))
    candidates = (
        select(t.c.id, t.c.attempts)
        .where(t.c.session_key == key, claimable)
        .order_by(t.c.id)
        .with_for_update(skip_locked=True)
        .cte("candidates")
    )
    values: dict[str, Any] = {"owner": me, "lease_until": bindparam("until")}
    started: ColumnElement[bool] = false()
    if start_first:
        oldest = select(func.min(candidates.c.id)).scalar_subquery()
        starts = (t.c.id == oldest) & (candidates.c.attempts == 0) & t.c.answer.is_(None)
        values |= {
            "state": case((starts, InboxState.RUNNING.value), else_=t.c.state),
            "attempts": case((starts, t.c.attempts + 1), else_=t.c.attempts),
            "updated_at": case((starts, now), else_=t.c.updated_at),
        }
        started = (t.c.state == InboxState.RUNNING.value) & (t.c.updated_at == now)
    return (
        update(t)
        .where(t.c.id == candidates.c.id, ~held_elsewhere)
        .values(values)
        .returning(*t.c, started.label("started"))
    )


RETRY_ENTRY = (
    update(TABLE)
    .where(TABLE.c.id == bindparam("entry_id"))
    .values(
        state=InboxState.QUEUED.value,
        reason="retry requested",
        answer=None,
        parts=[],
        owner=None,
        lease_until=None,
        received_at=bindparam("now"),  # a retry is asked for now: replay_max_age counts anew
        updated_at=bindparam("now"),
    )
    .returning(*TABLE.c)
)
"""An entry queued again for a fresh run, its earlier answer forgotten (``entry_id``,
``now``); returns the row, none for an unknown id."""
COUNT_PENDING = (
    select(TABLE.c.state, func.count()).where(is_pending(TABLE.c.state)).group_by(TABLE.c.state)
)
"""How many entries are in each pending state (the inbox depth)."""
BACKLOG = (
    select(TABLE.c.state, func.count(), func.min(TABLE.c.created_at))
    .where(is_pending(TABLE.c.state))
    .group_by(TABLE.c.state)
)
""":data:`COUNT_PENDING` with each state's oldest entry's storing time (``/metrics``)."""


def take_over_rows(conn: Connection, *, where: Any, owner: str, until: datetime) -> list[Row[Any]]:
    """:meth:`SqlInbox.take_over`'s transaction: the entries ``where`` selects, oldest first,
    made ``owner``'s until ``until`` (the rows as read, before the update)."""
    rows = list(conn.execute(select(TABLE).where(where).order_by(TABLE.c.id)).all())
    ids = [row.id for row in rows]
    if ids:
        conn.execute(
            update(TABLE).where(TABLE.c.id.in_(ids)).values(owner=owner, lease_until=until)
        )
    return rows
