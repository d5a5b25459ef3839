"""The pipeline as the cluster sees it, and the cluster as the pipeline sees it.

Several processes share the inbox (``bot/cluster/work.py``): the cluster feeds the pipeline
what it claims through :class:`Pipeline`, never through the gateway's attributes, and the
gateway hands stored messages to the cluster through :class:`WorkClaims`.
"""

from __future__ import annotations

from typing import Protocol

from bot.pipeline.job import Job
from bot.storage.inbox import InboxEntry


class Pipeline(Protocol):
    """What the cluster and replay may do with the message path (:class:`~.gateway.Gateway`)."""

    @property
    def accepting(self) -> bool:
        """False once the service is shutting down: claim nothing more."""
        ...

    def has_channel(self, name: str) -> bool:
        """A channel of that name runs here (an entry of another can't be answered)."""
        ...

    def submit(self, job: Job) -> None:
        """A message received here, stored and claimed: on to bursts and the scheduler."""
        ...

    def resubmit(self, entry: InboxEntry, *, replayed: bool = True, started: bool = False) -> Job:
        """An inbox entry received elsewhere or left by an earlier process: to the scheduler.
        ``started``: the claim that took it already marked it ``running``."""
        ...

    def idle(self, session_key: str) -> bool:
        """Nothing waits or runs for ``session_key`` here, and no debounce holds a message
        back: a job submitted now starts at once."""
        ...

    def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> list[Job]:
        """``/stopall`` from another process: drop what waits here (the stop service)."""
        ...

    def busy_sessions(self) -> set[str]:
        """Sessions with a message waiting or running here (their leases are kept)."""
        ...


class WorkClaims(Protocol):
    """Several processes share the inbox: a message is stored unowned and queued by the
    process that holds its session (:class:`bot.cluster.work.ClusterWork`)."""

    async def hold(self, job: Job) -> bool:
        """Whether ``job``'s message, received now, is stored as this process's own
        and runs here, with no claim: this process holds the session (half a lease or more
        left, no claim of it under way here) or has just taken it, nobody holding it (its last
        holder hands it back once idle). Unless an older message of the session waits in the
        inbox: then it is stored behind that one and dispatched. False: it is stored unowned
        and dispatched."""
        ...

    def went_idle(self, session_key: str) -> None:
        """Nothing of ``session_key`` waits or runs here any more (the scheduler says so)."""
        ...

    def kept(self, job: Job) -> None:
        """``job``'s message was stored as this process's own and runs here without a claim
        (counted for ``/healthz``)."""
        ...

    def dispatch(self, job: Job) -> None:
        """``job``'s message is stored unowned: claim its session."""
        ...

    def claim_soon(self, session_key: str) -> None:
        """Entries of ``session_key`` were stored unowned (a scheduled occurrence): the process
        holding the session runs them, in order with the chat's messages."""
        ...

    async def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> None: ...
