"""Building and tearing down the whole service from a Config.

``Loopgate`` owns every long-lived resource (database, providers, channels, runs) and opens and
closes them in order; the HTTP server and the terminal chat are two front ends on top of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import AsyncExitStack, suppress
from types import TracebackType
from typing import Any

import structlog

from agent_core import EventBus
from agent_core.providers import Provider
from bot.access import AccessPolicy, PairingStore
from bot.agents import AgentRouter
from bot.channel_startup import ChannelStarter
from bot.config import Config
from bot.gateway import Gateway
from bot.maintenance import run_periodically
from bot.platforms import PlatformDeps, build_platform_channels
from bot.run_registry import LocalRunRegistry
from bot.storage import (
    Database,
    SqlAgentStore,
    SqlChannelState,
    SqlDedupeStore,
    SqlSessionStore,
    SqlTraceStore,
    open_database,
)
from bot.storage.memory_index import SqlMemoryIndex
from channels import Channel
from channels.local import LocalChannel

log = structlog.get_logger(__name__)


class Loopgate:
    def __init__(self, config: Config, *, providers: dict[str, Provider] | None = None) -> None:
        """``providers`` replaces configured providers by name (benchmarks, embedding)."""
        self.config = config
        self._providers = providers
        self.events = EventBus()
        self.registry = LocalRunRegistry()
        self.web = LocalChannel(name="web")
        self.terminal = LocalChannel(name="cli")
        self._stack = AsyncExitStack()
        self._db: Database | None = None
        self._gateway: Gateway | None = None
        self.channel_starter = ChannelStarter()

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("Loopgate is not started")
        return self._gateway

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
        self._db = await open_database(self.config.database.url)
        self._stack.push_async_callback(self._db.aclose)
        sessions = SqlSessionStore(self._db)
        router = AgentRouter(
            self.config,
            store=sessions,
            traces=SqlTraceStore(self._db),
            events=self.events,
            providers=self._providers,
            agent_store=SqlAgentStore(self._db),
            memory_index=SqlMemoryIndex(self._db),
        )
        self._stack.push_async_callback(router.aclose)
        await self._warn_unknown_agents(router)
        dedupe = SqlDedupeStore(self._db)
        self._start_background(run_periodically("dedupe.prune", dedupe.prune))
        gateway = Gateway(
            self.config,
            router=router,
            registry=self.registry,
            dedupe=dedupe,
            events=self.events,
            sessions=sessions,
            access=AccessPolicy(self.config, PairingStore(self._db)),
        )
        self._gateway = gateway
        self._stack.push_async_callback(gateway.scheduler.aclose)
        for channel in self._channels():
            await self._start_channel(channel)
        log.info("loopgate.started", channels=sorted(gateway.channels), db=self._db.safe_url)

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

    def _start_background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)

        async def cancel() -> None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

        self._stack.push_async_callback(cancel)

    def _channels(self) -> list[Channel]:
        deps = PlatformDeps(state=SqlChannelState(self.db), seen=SqlDedupeStore(self.db))
        return [self.web, self.terminal, *build_platform_channels(self.config, deps)]

    async def _start_channel(self, channel: Channel) -> None:
        self.gateway.add_channel(channel)
        self._stack.push_async_callback(channel.stop)
        retry = await self.channel_starter.start(channel, self.gateway.handle_inbound)
        if retry is not None:
            self._start_background(retry)

    async def aclose(self) -> None:
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
