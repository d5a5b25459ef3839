"""Building and tearing down the whole service from a Config.

``Loopgate`` owns every long-lived resource (database, providers, channels, runs) and opens and
closes them in order; the HTTP server and the terminal chat are two front ends on top of it.

Start: database, agents, gateway, inbox replay (queued before any channel receives), channels.
Stop (``drain`` on SIGTERM, then ``aclose``): running answers get ``bot.shutdown_grace``
seconds while the channels keep receiving (commands act, new messages are stored for the next
process), then intake stops; what still runs is cancelled and goes back to the inbox while the
channels can still remove its typing and reactions; only then do the channels close, and the
database last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog

from agent_core import EventBus, cancel_and_wait
from agent_core.mcp import McpManager
from agent_core.orchestration import Orchestrator
from agent_core.providers import Provider
from bot.agents.exec_setup import prepare_exec
from bot.agents.router import AgentRouter
from bot.config import Config
from bot.evolution.service import EvolutionService
from bot.maintenance import run_periodically
from bot.pipeline.access import AccessPolicy, PairingStore
from bot.pipeline.dedupe import DedupeStore
from bot.pipeline.file_sender import ChatFileSender
from bot.pipeline.gateway import Gateway
from bot.pipeline.replay import SWEEP_EVERY_SECONDS, replay_pending, sweep
from bot.pipeline.run_registry import ChildRegistration, LocalRunRegistry, RunRegistry
from bot.platforms import PlatformDeps, build_platform_channels
from bot.platforms.startup import ChannelStarter
from bot.redaction import register_secrets, secrets_of
from bot.scheduling.jobs import ChatCronJobs
from bot.scheduling.service import Scheduling
from bot.storage import (
    Database,
    SqlAgentStore,
    SqlChannelState,
    SqlDedupeStore,
    SqlOrchestrationStore,
    SqlSessionStore,
    SqlTraceStore,
    open_database,
)
from bot.storage.cron import SqlCronJobs
from bot.storage.inbox import SqlInbox
from bot.storage.memory_index import SqlMemoryIndex
from bot.storage.usage import SqlUsage
from bot.telemetry.service import Telemetry
from bot.usage import Meter
from channels import Channel
from channels.local import LocalChannel

if TYPE_CHECKING:
    from bot.cluster.service import Cluster  # imports redis: only when redis.url is set

log = structlog.get_logger(__name__)


class Loopgate:
    def __init__(
        self,
        config: Config,
        *,
        providers: dict[str, Provider] | None = None,
        durable: bool = True,
        migrate_apart: bool = False,
    ) -> None:
        """``providers`` replaces configured providers by name (benchmarks, embedding).
        ``durable`` False: no inbox and no replay (the terminal chat). ``migrate_apart``: a
        database behind head is migrated by a child process, so Alembic never loads in this
        one (``loopgate serve``, a long-lived process: ``bot.storage.open_database``)."""
        self.config = config
        self._migrate_apart = migrate_apart
        self._providers = providers
        self.durable = durable
        register_secrets(secrets_of(config))
        self.inbox: SqlInbox | None = None
        self.draining = False
        self._background: list[asyncio.Task[None]] = []
        self.events = EventBus()
        self.telemetry = Telemetry(config.tracing)
        """Metrics (``GET /metrics``) and the OTLP export of traces (docs/metrics.md)."""
        # Several processes on one Redis (docs/scaling.md); None: this process is the service.
        self.cluster: Cluster | None = None
        if config.redis.url:
            from bot.cluster.service import Cluster

            self.cluster = Cluster(config)
        self.registry: RunRegistry = (
            self.cluster.registry if self.cluster is not None else LocalRunRegistry()
        )
        self.web = LocalChannel(name="web")
        self.terminal = LocalChannel(name="cli")
        self._stack = AsyncExitStack()
        self._db: Database | None = None
        self._gateway: Gateway | None = None
        self.orchestrator: Orchestrator | None = None
        self.mcp = McpManager(config.mcp.specs(), lazy=config.mcp.startup == "lazy")
        self.channel_starter = ChannelStarter()
        self._evolution: EvolutionService | None = None
        self.scheduling: Scheduling | None = None
        """Scheduled jobs and heartbeats (bot/scheduling); None without the inbox."""
        self._meter: Meter | None = None

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("Loopgate is not started")
        return self._gateway

    @property
    def sessions_waiting_for_slot(self) -> int:
        """Sessions whose next run waits for ``bot.max_concurrent_runs`` (0 before start)."""
        return 0 if self._gateway is None else self._gateway.scheduler.waiting_for_slot

    @property
    def evolution(self) -> EvolutionService:
        """Evolution suggestions and their review (bot/evolution); its schedule runs here."""
        if self._evolution is None:
            raise RuntimeError("Loopgate is not started")
        return self._evolution

    @property
    def meter(self) -> Meter:
        """Usage accounting, prices and limits of every model call (bot/usage)."""
        if self._meter is None:
            raise RuntimeError("Loopgate is not started")
        return self._meter

    @property
    def db(self) -> Database:
        if self._db is None:
            raise RuntimeError("Loopgate is not started")
        return self._db

    async def start(self) -> None:
        """Open everything; on failure, close what was already opened, then re-raise."""
        try:
            await self._start()
        except BaseException:
            await self.aclose()
            raise

    async def _start(self) -> None:
        self._db = await open_database(
            self.config.database.url,
            migrate_apart=self._migrate_apart,
            pool_size=self.config.database.pool_size,
        )
        self._stack.push_async_callback(self._db.aclose)
        await self._db.warn_if_pool_too_large(self.config.database.pool_size)
        if self.cluster is not None:
            self._stack.push_async_callback(self.cluster.aclose)
            await self.cluster.start()
        # Closed after the runs and before the database: the last runs' spans are sent.
        self.telemetry.start()
        self._stack.push_async_callback(self.telemetry.aclose)
        sessions = SqlSessionStore(self._db)
        orchestration = SqlOrchestrationStore(self._db)
        # Scheduled jobs need the inbox (their occurrences are inbox entries).
        cron_jobs = SqlCronJobs(self._db) if self.durable else None
        # A server that fails to start degrades the service (``/healthz``) and is retried in
        # the background; its agents run without its tools meanwhile.
        self._stack.push_async_callback(self.mcp.aclose)
        await self.mcp.start()
        exec_runtime = await prepare_exec(self.config)
        self._meter = meter = Meter(self.config, SqlUsage(self._db))
        if self.cluster is not None:  # the limits' counters are shared by every process
            meter.counters = self.cluster.usage_counters(meter.seed)
        router = AgentRouter(
            self.config,
            store=sessions,
            traces=self.telemetry.traces(SqlTraceStore(self._db)),
            events=self.events,
            providers=self._providers,
            agent_store=SqlAgentStore(self._db),
            memory_index=SqlMemoryIndex(self._db),
            orchestration=orchestration,
            tasks=orchestration,
            mcp=self.mcp,
            locks=self.cluster.locks if self.cluster is not None else None,
            cron=ChatCronJobs(cron_jobs) if cron_jobs is not None else None,
            exec_runtime=exec_runtime,
            meter=meter,
        )
        # New or changed MCP tools reach each agent the next time it is resolved.
        self.mcp.on_change(lambda _server: router.invalidate())
        self._stack.push_async_callback(router.aclose)
        await self._warn_unknown_agents(router)
        self._evolution = EvolutionService(self._db, self.config, router)
        self._stack.push_async_callback(self._evolution.aclose)
        self._evolution.start()
        dedupe = SqlDedupeStore(self._db)
        self._start_background(run_periodically("dedupe.prune", dedupe.prune))
        if self.durable and self.cluster is not None:
            # One identity per process in Redis and in the inbox; a dead process's entries
            # are taken over after the same lease as its sessions.
            self.inbox = SqlInbox(
                self._db,
                owner=self.cluster.process_id,
                lease_seconds=self.config.cluster.lease_seconds,
            )
            self.inbox.shared = True
        else:
            self.inbox = SqlInbox(self._db) if self.durable else None
        gateway = Gateway(
            self.config,
            router=router,
            registry=self.registry,
            dedupe=self._shared_dedupe(dedupe),
            events=self.events,
            sessions=sessions,
            access=AccessPolicy(self.config, PairingStore(self._db)),
            inbox=self.inbox,
            channel_ready=self.channel_starter.wait_up,
            usage=meter.store,
            metrics=self.telemetry.metrics,
        )
        self._gateway = gateway
        router.exec_approver = gateway.approvals
        if self.cluster is not None:  # before any run may ask: answers reach every process
            await self.cluster.approvals.attach(gateway.approvals)
        self._stack.push_async_callback(gateway.aclose)
        # send_file reaches the run's chat through the gateway's channels (before any resolve).
        router.files = ChatFileSender(gateway.channels, sent=dedupe)
        self.orchestrator = Orchestrator(
            router.resolve,
            self.events,
            announce=gateway.announce,
            observer=ChildRegistration(self.registry),
        )
        router.orchestrator = self.orchestrator
        # Children go first at shutdown: they use the providers, the database and the turns.
        self._stack.push_async_callback(self.orchestrator.aclose)
        channels = self._channels()
        for channel in channels:
            gateway.add_channel(channel)
        if self.inbox is not None:
            await self._replay(gateway, self.inbox)
        for channel in channels:
            await self._start_channel(channel)
        if cron_jobs is not None:
            # After the channels: an occurrence due at start-up is sent like a new message.
            self.scheduling = Scheduling(self.config, cron_jobs, gateway)
            self._stack.push_async_callback(self.scheduling.aclose)
            await self.scheduling.start()
        log.info("loopgate.started", channels=sorted(gateway.channels), db=self._db.safe_url)

    async def _replay(self, gateway: Gateway, inbox: SqlInbox) -> None:
        # Queued before any channel receives, so each session's replayed messages go first.
        max_age = self.config.bot.replay_max_age
        if self.cluster is not None:
            await self._distribute(gateway, inbox, max_age)
            return
        await replay_pending(gateway, inbox, max_age=max_age)
        self._start_background(
            run_periodically(
                "inbox.sweep",
                lambda: sweep(gateway, inbox, max_age=max_age),
                every=SWEEP_EVERY_SECONDS,
                first_after=SWEEP_EVERY_SECONDS,
            )
        )
        self._start_background(run_periodically("inbox.prune", inbox.prune))

    async def _distribute(self, gateway: Gateway, inbox: SqlInbox, max_age: float) -> None:
        """Several processes: what nobody holds is claimed session by session, at start-up
        and by every sweep, never a live peer's work (docs/scaling.md)."""
        assert self.cluster is not None
        work = self.cluster.distribute(inbox, max_age=max_age)
        self._stack.push_async_callback(work.aclose)  # after the gateway handed entries back
        await work.attach(gateway)
        gateway.distribute(work)
        # A web chat's socket (or the terminal) is in this process: only it can answer there.
        gateway.local_channels = frozenset({self.web.name, self.terminal.name})
        await work.sweep()

        self._start_background(
            run_periodically(
                "inbox.sweep", work.sweep, every=work.sweep_every, first_after=work.sweep_every
            )
        )
        self._start_background(run_periodically("inbox.prune", inbox.prune))

    async def _warn_unknown_agents(self, router: AgentRouter) -> None:
        """Agents named by agents.default / channels.<name>.agent that nobody defines: their
        messages get ``bot.unknown_agent_reply`` until one is added (config or ``agents set``)."""
        known = {*router.agent_ids, *await router.stored_ids()}
        channels = self.config.channels
        named = {"agents.default": self.config.agents.default}
        for name in ("telegram", "slack", "zalo"):
            named[f"channels.{name}.agent"] = getattr(channels, name).agent or ""
        for key, agent_id in named.items():
            if agent_id and agent_id not in known:
                log.warning("agent.unknown", key=key, agent_id=agent_id, known=sorted(known))

    def _shared_dedupe(self, store: SqlDedupeStore) -> DedupeStore:
        # Clustered: a repeat that reaches any process is caught in Redis, not the database.
        return self.cluster.dedupe(store) if self.cluster is not None else store

    def _start_background(self, coro: Coroutine[Any, Any, None]) -> None:
        # Cancelled first in aclose: housekeeping must not touch what is being closed.
        self._background.append(asyncio.create_task(coro))

    def _channels(self) -> list[Channel]:
        deps = PlatformDeps(
            state=SqlChannelState(self.db),
            seen=self._shared_dedupe(SqlDedupeStore(self.db)),
            poll_gate=self.cluster.poll_gate if self.cluster is not None else None,
            pace_store=self.cluster.pace_store if self.cluster is not None else None,
        )
        return [self.web, self.terminal, *build_platform_channels(self.config, deps)]

    async def _start_channel(self, channel: Channel) -> None:
        self._stack.push_async_callback(channel.stop)
        retry = await self.channel_starter.start(channel, self.gateway.handle_inbound)
        if retry is not None:
            self._start_background(retry)

    async def drain(self, grace: float | None = None) -> int:
        """Let running answers finish for up to ``grace`` seconds (default
        ``bot.shutdown_grace``), then stop intake; returns how many still run. Call ``aclose``
        after it.

        The channels keep receiving during the grace: a ``/stop`` sent meanwhile acts at once,
        and every other message is stored for the next process (webhooks answer 200, not a 503
        that the platform would retry minutes later)."""
        if self.draining or self._gateway is None:
            return 0
        self.draining = True
        gateway = self._gateway
        grace = self.config.bot.shutdown_grace if grace is None else grace
        log.info("loopgate.draining", grace_s=grace, active_runs=self.registry.active_runs)
        gateway.hand_over()
        gateway.scheduler.hold()  # queued messages stay queued in the inbox
        if self.cluster is not None:
            await self.cluster.release_pollers()  # another process polls while we drain
        still_running = await gateway.scheduler.wait_running(grace)
        # All channels at once, so the time left before a PaaS's kill is not spent one
        # channel at a time; what they fetched meanwhile is still stored.
        channels = list(gateway.channels.values())
        stopped = await asyncio.gather(
            *(channel.stop_receiving() for channel in channels), return_exceptions=True
        )
        for channel, outcome in zip(channels, stopped, strict=True):
            if isinstance(outcome, Exception):
                log.warning(
                    "channel.stop_receiving_failed", channel=channel.name, error=str(outcome)
                )
        gateway.stop_accepting()
        log.info("loopgate.drained", still_running=still_running)
        return still_running

    async def aclose(self) -> None:
        for task in self._background:
            await cancel_and_wait(task)
        self._background.clear()
        if self._gateway is not None:
            self._gateway.stop_accepting()
            # Runs end while the channels are open, so their typing and reactions are cleaned
            # up; the turns hand their inbox entries back for the next process.
            self._gateway.turns.shutting_down = True
            await self._gateway.aclose()
        await self._stack.aclose()
        log.info("loopgate.stopped")

    async def __aenter__(self) -> Loopgate:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
