"""The run registry of a clustered process: ``/stop`` and ``/stopall`` reach runs anywhere.

Each process keeps its own runs (a :class:`~bot.pipeline.run_registry.LocalRunRegistry`) and mirrors
them into Redis: a hash per process (``<prefix>:runs:<process>``, expiring a lease after the
process stops refreshing it). Every process keeps an in-memory view of the other processes'
runs, read from those hashes every third of a lease and, above all, right before a ``/stop``
or ``/stopall`` looks at it (:meth:`ClusterRunRegistry.refresh`, one script), so the gateway's
synchronous ``runs_of`` sees every run of a session with its requester and applies the same
permission rules as for a local one. Stopping a run of another process publishes an ``abort``
on the ``<prefix>:runs`` channel that its owner carries out on its local registry.

Runs start and end far more often than anybody stops one: an event per start and end on that
channel, delivered to every process, cost each reply 2 x N deliveries (issue 33), so the view
is read when a stop needs it instead of being kept current. A process that leaves still
publishes ``gone``; the ``add`` and ``del`` events of an older version are still applied.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import structlog

from agent_core import cancel_and_wait, stop_if_cancelled
from bot.cluster.connection import RedisLink, RedisState
from bot.pipeline.run_registry import ActiveRun, LocalRunRegistry

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RemoteRun:
    run: ActiveRun
    owner: str
    started: float


class RemoteHandle:
    """The ``task`` of a run in another process: cancelling it asks that process to."""

    def __init__(self, registry: ClusterRunRegistry, run_id: str, session_key: str) -> None:
        self._registry = registry
        self._run_id = run_id
        self._session_key = session_key

    def cancel(self, msg: Any | None = None) -> bool:
        return self._registry.abort(self._run_id, self._session_key)

    def cancelling(self) -> int:
        return 0  # not known here; the owner ignores a second abort


# The other processes' run records, one reply: [[hash name, [record, ...]], ...]. A member
# whose hash is gone (its process stopped, or died and the hash expired) leaves the directory
# in the same script, so a process writing its first record meanwhile is never dropped.
_READ_RECORDS = """
local found = {}
for _, process in ipairs(redis.call('smembers', KEYS[1])) do
  if process ~= ARGV[2] then
    local name = ARGV[1] .. process
    if redis.call('exists', name) == 1 then
      found[#found + 1] = {name, redis.call('hvals', name)}
    else
      redis.call('srem', KEYS[1], process)
    end
  end
end
return found
"""


# This process's record changes of one batch, in one call: ARGV[3] records (run id, record)
# from ARGV[4], then the run ids to delete. Written records renew the hash's expiry and list
# the process in the directory (KEYS[2]) after them, as a resync expects (_READ_RECORDS). One
# script costs the client a third of what the pipeline of HSET, PEXPIRE and SADD did
# (issue 33: every run writes and deletes its record).
_WRITE_RECORDS = """
local added = tonumber(ARGV[3])
for i = 0, added - 1 do
  redis.call('hset', KEYS[1], ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end
for i = 4 + 2 * added, #ARGV do
  redis.call('hdel', KEYS[1], ARGV[i])
end
if added > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('sadd', KEYS[2], ARGV[2])
end
return added
"""


def _without_unseen_runs(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ops`` without the runs that ended before their "add" was sent: no process could have
    seen them, so their record is of use to nobody (a ``/stop`` elsewhere reads what was sent,
    and these were never sent)."""
    added = {op["run"]["run_id"] for op in ops if op["op"] == "add"}
    ended = {op["run_id"] for op in ops if op["op"] == "del" and op["run_id"] in added}
    if not ended:
        return ops
    return [
        op
        for op in ops
        if not (
            (op["op"] == "add" and op["run"]["run_id"] in ended)
            or (op["op"] == "del" and op["run_id"] in ended)
        )
    ]


def _record(run: ActiveRun, owner: str, started: float) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "agent_id": run.agent_id,
        "session_key": run.session_key,
        "requester_id": run.requester_id,
        "parent_run_id": run.parent_run_id,
        "owner": owner,
        "started": started,
    }


class ClusterRunRegistry:
    """A :class:`~bot.pipeline.run_registry.RunRegistry` whose stops reach every process."""

    def __init__(self, link: RedisLink, local: LocalRunRegistry | None = None) -> None:
        self.link = link
        self.local = local or LocalRunRegistry()
        self.channel = link.key("runs")
        self.hash_key = link.key("runs", link.process_id)
        self.directory = link.key("runners")
        """The processes that wrote a run record: a resync reads their hashes in one script
        instead of SCANning the whole keyspace (dedupe and session keys included) every third
        of a lease. Not ``runs:*``, which an older version's SCAN would read as a hash."""
        self._started: dict[str, float] = {}
        self._remote: dict[str, RemoteRun] = {}
        self._journal: list[dict[str, Any]] | None = None  # events seen during a resync
        self._ops: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed = asyncio.Event()
        self._written = True
        """A record was written (or may have been) since the last rewrite of the hash."""
        self._resyncing = asyncio.Lock()

    # -- RunRegistry -----------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the other processes' runs now: a stop is about to look at them. With Redis
        unreachable the last view stays (a stop elsewhere could not be delivered anyway), and
        while it is known to be down the stop does not wait for it."""
        if self.link.state is not RedisState.OK:
            return
        try:
            await self._resync()
        except Exception as exc:
            stop_if_cancelled(exc)
            self.link.mark(False, exc)
            log.warning("cluster.runs_refresh_failed", error=repr(exc))

    def register(self, run: ActiveRun) -> None:
        self.local.register(run)
        started = self._started[run.run_id] = time.time()
        self._ops.put_nowait({"op": "add", "run": _record(run, self.link.process_id, started)})

    def unregister(self, run_id: str) -> None:
        self.local.unregister(run_id)
        if self._started.pop(run_id, None) is not None:
            self._ops.put_nowait({"op": "del", "owner": self.link.process_id, "run_id": run_id})

    def runs_of(self, session_key: str) -> list[ActiveRun]:
        """The session's runs in every process whose parent is not running, oldest first."""
        mine = [(self._started.get(r.run_id, 0.0), r) for r in self.local.runs_of(session_key)]
        theirs = [
            (remote.started, remote.run)
            for remote in self._remote.values()
            if remote.run.session_key == session_key
            and remote.run.parent_run_id not in self._remote
        ]
        return [run for _, run in sorted(mine + theirs, key=lambda pair: pair[0])]

    def all_runs(self) -> list[ActiveRun]:
        return self.local.all_runs()  # the dashboard shows this process's runs

    def abort(self, run_id: str, session_key: str) -> bool:
        if run_id in self._started:
            return self.local.abort(run_id, session_key)
        remote = self._remote.get(run_id)
        if remote is None or remote.run.session_key != session_key:
            return False
        log.info("run.abort_remote", run_id=run_id, session_key=session_key, owner=remote.owner)
        self._ops.put_nowait(
            {"op": "abort", "owner": remote.owner, "run_id": run_id, "session_key": session_key}
        )
        return True

    def abort_session(self, session_key: str) -> int:
        cancelled = self.local.abort_session(session_key)
        remote = [r for r in self._remote.values() if r.run.session_key == session_key]
        if remote:
            self._ops.put_nowait(
                {"op": "abort_session", "session_key": session_key, "from": self.link.process_id}
            )
        return cancelled + len(remote)

    @property
    def active_runs(self) -> int:
        return self.local.active_runs

    def active_runs_by_agent(self) -> dict[str, int]:
        return self.local.active_runs_by_agent()

    # -- Redis -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._write(), name="cluster:runs-writer"),
            asyncio.create_task(self._listen(), name="cluster:runs-listener"),
            asyncio.create_task(self._refresh(), name="cluster:runs-refresh"),
        ]
        # Stops sent by others must reach us from the first run on.
        await asyncio.wait_for(self._subscribed.wait(), timeout=10)

    async def aclose(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()
        with suppress(Exception):
            async with self.link.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.hash_key)
                pipe.srem(self.directory, self.link.process_id)
                gone = {"op": "gone", "owner": self.link.process_id}
                pipe.publish(self.channel, json.dumps(gone))
                await pipe.execute()

    def _lease_ms(self) -> int:
        return int(self.link.lease_seconds * 1000)

    async def _write(self) -> None:
        # One writer, so a run's "add" always reaches Redis before its "del". It sends what
        # has queued up meanwhile in one round trip (under load, several runs' events).
        while True:
            stop_if_cancelled()
            ops = [await self._ops.get()]
            while not self._ops.empty():
                ops.append(self._ops.get_nowait())
            ops = _without_unseen_runs(ops)
            if not ops:
                continue
            if any(op["op"] != "sync" for op in ops):
                self._written = True
            try:
                await self._send(ops)
            except Exception as exc:
                stop_if_cancelled(exc)
                self._written = True  # the next refresh rewrites the hash
                self.link.mark(False, exc)
                # Adds and deletes are repaired by the next refresh; a stop is not.
                aborts = any(op["op"].startswith("abort") for op in ops)
                level = log.warning if aborts else log.debug
                level("cluster.runs_write_failed", ops=len(ops), error=repr(exc))

    async def _send(self, ops: list[dict[str, Any]]) -> None:
        if all(op["op"] in ("add", "del") for op in ops):
            # What nearly every batch is: runs started and ended (their order within a batch
            # does not matter, _without_unseen_runs took out a run's add and del together).
            added = [op["run"] for op in ops if op["op"] == "add"]
            records = [part for run in added for part in (run["run_id"], json.dumps(run))]
            deleted = [op["run_id"] for op in ops if op["op"] == "del"]
            await self.link.run_script(
                _WRITE_RECORDS,
                [self.hash_key, self.directory],
                self._lease_ms(),
                self.link.process_id,
                len(added),
                *records,
                *deleted,
            )
            return
        # Not a MULTI: one connection runs the commands in order, which is all the readers
        # need (a record is written before its event is published).
        async with self.link.client.pipeline(transaction=False) as pipe:
            for op in ops:
                self._queue_op(pipe, op)
            await pipe.execute()

    def _queue_op(self, pipe: Any, op: dict[str, Any]) -> None:
        if op["op"] == "add":
            pipe.hset(self.hash_key, op["run"]["run_id"], json.dumps(op["run"]))
            pipe.pexpire(self.hash_key, self._lease_ms())
            # After the record: a resync between the two must not find us listed without it
            # (it would take us off the list again).
            pipe.sadd(self.directory, self.link.process_id)
        elif op["op"] == "del":
            pipe.hdel(self.hash_key, op["run_id"])
        elif op["op"] == "sync":
            pipe.delete(self.hash_key)
            records: dict[Any, Any] = {
                run.run_id: json.dumps(
                    _record(run, self.link.process_id, self._started.get(run.run_id, 0.0))
                )
                for run in self.local.all_runs()
            }
            if records:
                pipe.hset(self.hash_key, mapping=records)
                pipe.pexpire(self.hash_key, self._lease_ms())
                pipe.sadd(self.directory, self.link.process_id)
        if op["op"] not in ("sync", "add", "del"):
            pipe.publish(self.channel, json.dumps(op))

    async def _refresh(self) -> None:
        while True:
            stop_if_cancelled()
            await asyncio.sleep(self.link.lease_seconds / 3)
            # With no run here since the last rewrite there is nothing to rewrite: an idle
            # process sends only the resync's one script.
            if self._started or self._written:
                self._written = False
                self._ops.put_nowait({"op": "sync"})
            try:
                await self._resync()
            except Exception as exc:
                stop_if_cancelled(exc)
                self.link.mark(False, exc)

    async def _resync(self) -> None:
        """Rebuild the view of other processes' runs from their hashes."""
        async with self._resyncing:  # a stop's and the timer's: one journal at a time
            await self._read_view()

    async def _read_view(self) -> None:
        self._journal = []
        try:
            found: dict[str, RemoteRun] = {}
            hashes = await self.link.run_script(
                _READ_RECORDS, [self.directory], self.link.key("runs", ""), self.link.process_id
            )
            for name, records in hashes:
                for raw in records:
                    try:
                        remote = self._remote_run(json.loads(raw))
                    except (ValueError, KeyError, TypeError) as exc:
                        log.warning("cluster.runs_bad_record", key=name, error=repr(exc))
                        continue
                    found[remote.run.run_id] = remote
            journal = self._journal
        finally:
            self._journal = None
        self._remote = found
        for event in journal:  # what happened while the hashes were read wins
            self._safe_apply(event)

    async def _listen(self) -> None:
        async def subscribed() -> None:
            await self._resync()  # what was registered before we listened
            self._subscribed.set()

        await self.link.listen(self.channel, self._on_message, subscribed)

    def _on_message(self, data: bytes | str) -> None:
        try:
            event = json.loads(data)
        except ValueError as exc:
            log.warning("cluster.runs_bad_event", error=repr(exc))
            return
        if self._journal is not None:
            self._journal.append(event)
        self._safe_apply(event)

    def _safe_apply(self, event: Any) -> None:
        try:
            self._apply(event)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A stray publish or another version's event: Redis itself is fine, go on.
            log.warning("cluster.runs_bad_event", error=repr(exc))

    def _apply(self, event: dict[str, Any]) -> None:
        me = self.link.process_id
        op = event.get("op")
        if op == "add" and event["run"]["owner"] != me:
            remote = self._remote_run(event["run"])
            self._remote[remote.run.run_id] = remote
        elif op == "del" and event["owner"] != me:
            self._remote.pop(event["run_id"], None)
        elif op == "gone" and event["owner"] != me:
            self._remote = {k: r for k, r in self._remote.items() if r.owner != event["owner"]}
        elif op == "abort" and event["owner"] == me and self._journal is None:
            # (During a resync the event waits in the journal, which replays it once.)
            log.info("run.abort_requested", run_id=event["run_id"])
            self.local.abort(event["run_id"], event["session_key"])
        elif op == "abort_session" and event["from"] != me and self._journal is None:
            self.local.abort_session(event["session_key"])

    def _remote_run(self, record: dict[str, Any]) -> RemoteRun:
        run = ActiveRun(
            record["run_id"],
            record["agent_id"],
            record["session_key"],
            record["requester_id"],
            RemoteHandle(self, record["run_id"], record["session_key"]),
            parent_run_id=record.get("parent_run_id"),
        )
        return RemoteRun(run, record["owner"], float(record.get("started", 0.0)))
