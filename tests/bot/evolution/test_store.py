"""The evolution engine's SQL (``bot/evolution/store.py``): suggestions round-trip, filters and
order, the fingerprint of a change, compare-and-set status changes, and metric snapshots."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.evolution.records import AgentMetrics, Suggestion, SuggestionStatus
from bot.evolution.store import SuggestionStore, fingerprint, history_event
from bot.storage import Database

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHANGE = {"kind": "param", "param": "max_iterations", "from": 20, "to": 22}


def suggestion(
    *,
    agent_id: str = "main",
    rule: str = "IterationLimitRule",
    at: datetime = T0,
    change: dict[str, Any] | None = None,
    status: SuggestionStatus = SuggestionStatus.PENDING,
) -> Suggestion:
    return Suggestion(
        id=uuid.uuid4().hex[:12],
        agent_id=agent_id,
        rule=rule,
        status=status,
        evidence={"runs": 150, "capped": 30},
        change=change or dict(CHANGE),
        summary="Allow a few more iterations.",
        created_at=at,
        decided_by=None,
        decided_at=None,
        applied_at=None,
        baseline=None,
        outcome=None,
    )


def same_instant(a: datetime | None, b: datetime | None) -> bool:
    """SQLite gives naive UTC back, Postgres aware: compare the instant."""
    assert a is not None and b is not None
    return a.replace(tzinfo=None) == b.astimezone(UTC).replace(tzinfo=None)


class TestFingerprint:
    def test_key_order_does_not_matter_and_each_part_does(self) -> None:
        base = fingerprint("main", "R", {"a": 1, "b": 2})
        assert base == fingerprint("main", "R", {"b": 2, "a": 1})
        assert len(base) == 32
        assert base != fingerprint("other", "R", {"a": 1, "b": 2})
        assert base != fingerprint("main", "S", {"a": 1, "b": 2})
        assert base != fingerprint("main", "R", {"a": 1, "b": 3})


class TestSuggestions:
    async def test_round_trip(self, db: Database) -> None:
        store = SuggestionStore(db)
        made = suggestion()
        await store.add(made)
        found = await store.get(made.id)
        assert found is not None
        assert (found.id, found.agent_id, found.rule, found.status) == (
            made.id, "main", "IterationLimitRule", SuggestionStatus.PENDING
        )  # fmt: skip
        assert (found.evidence, found.change, found.summary) == (
            made.evidence, made.change, made.summary
        )  # fmt: skip
        assert same_instant(found.created_at, T0) and same_instant(found.updated_at, T0)
        assert (found.previous, found.baseline, found.history) == (None, None, ())
        assert await store.get("nope") is None

    async def test_list_newest_first_with_filters(self, db: Database) -> None:
        store = SuggestionStore(db)
        old = suggestion(at=T0)
        new = suggestion(at=T0 + timedelta(hours=1), rule="ToolFailureRule")
        other = suggestion(at=T0 + timedelta(hours=2), agent_id="helper")
        done = suggestion(at=T0 + timedelta(hours=3), status=SuggestionStatus.REJECTED)
        for s in (old, new, other, done):
            await store.add(s)
        ids = lambda found: [s.id for s in found]  # noqa: E731
        assert ids(await store.list()) == [done.id, other.id, new.id, old.id]
        assert ids(await store.list(agent_id="main")) == [done.id, new.id, old.id]
        assert ids(await store.list(SuggestionStatus.PENDING, "main")) == [new.id, old.id]
        assert ids(await store.list(rule="ToolFailureRule")) == [new.id]
        assert await store.list(SuggestionStatus.APPLIED) == []

    async def test_same_change_finds_the_fingerprint_per_agent(self, db: Database) -> None:
        store = SuggestionStore(db)
        first = suggestion(at=T0)
        again = suggestion(at=T0 + timedelta(days=1))
        elsewhere = suggestion(agent_id="helper")
        different = suggestion(change={**CHANGE, "to": 23})
        for s in (first, again, elsewhere, different):
            await store.add(s)
        found = await store.same_change("main", fingerprint("main", "IterationLimitRule", CHANGE))
        assert [s.id for s in found] == [again.id, first.id]

    async def test_transition_is_compare_and_set(self, db: Database) -> None:
        store = SuggestionStore(db)
        made = suggestion()
        await store.add(made)
        event = history_event("rejected", by="carol", detail="not now")
        rejected = await store.transition(
            made,
            SuggestionStatus.PENDING,
            status=SuggestionStatus.REJECTED,
            reason="not now",
            decided_by="carol",
            event=event,
        )
        assert rejected is not None and rejected.history == (event,)
        # Someone else decided meanwhile: this approval changes nothing.
        lost = await store.transition(
            made, SuggestionStatus.PENDING, status=SuggestionStatus.APPROVED, decided_by="dave"
        )
        assert lost is None
        stored = await store.get(made.id)
        assert stored is not None
        assert (stored.status, stored.decided_by, stored.reason) == (
            SuggestionStatus.REJECTED, "carol", "not now"
        )  # fmt: skip
        assert stored.history == (event,) and stored.history[0]["by"] == "carol"
        assert stored.updated_at is not None and not same_instant(stored.updated_at, T0)

    async def test_history_grows_in_order(self, db: Database) -> None:
        store = SuggestionStore(db)
        made = suggestion()
        await store.add(made)
        approved = await store.transition(
            made, SuggestionStatus.PENDING, status=SuggestionStatus.APPROVED,
            event=history_event("approved", by="carol"),
        )  # fmt: skip
        assert approved is not None
        applied = await store.transition(
            approved, SuggestionStatus.APPROVED, status=SuggestionStatus.APPLIED,
            previous={"field": "max_iterations"}, event=history_event("applied"),
        )  # fmt: skip
        assert applied is not None
        stored = await store.get(made.id)
        assert stored is not None and stored.status is SuggestionStatus.APPLIED
        assert [e["event"] for e in stored.history] == ["approved", "applied"]
        assert stored.previous == {"field": "max_iterations"}


class TestSnapshots:
    async def test_saved_listed_oldest_first_and_pruned(self, db: Database) -> None:
        store = SuggestionStore(db)
        await store.save_snapshots([], T0)  # nothing to write is no error
        day = timedelta(days=1)
        for i, at in enumerate((T0, T0 + day, T0 + 2 * day)):
            await store.save_snapshots(
                [
                    AgentMetrics("main", at - day, at, runs=10 + i, completed=10 + i),
                    AgentMetrics("helper", at - day, at, runs=1),
                ],
                at,
            )
        main = await store.snapshots("main")
        assert [s["runs"] for s in main] == [10, 11, 12]
        assert main[0]["metrics"]["runs"] == 10 and main[0]["agent_id"] == "main"
        assert len(await store.snapshots()) == 6
        assert await store.prune_snapshots(T0 + day) == 2  # strictly older only
        assert [s["runs"] for s in await store.snapshots("main")] == [11, 12]
