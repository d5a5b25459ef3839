"""``GET /metrics``: this process's metrics in the Prometheus text format (docs/metrics.md).

With ``admin.token`` set it takes that token as ``Authorization: Bearer`` (Prometheus'
``authorization`` scrape setting) and answers 401 without it; without ``admin.token`` it is
open, like ``/healthz``. Counters come from :class:`bot.telemetry.metrics.Metrics`; the states
(active runs, channels, the inbox) are read here, when asked.
"""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bot.app import Loopgate
from bot.http.web_auth import TokenAuth
from bot.platforms.startup import ChannelState
from bot.telemetry.metrics import ScrapeState

log = structlog.get_logger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The classic text format: every Prometheus version reads it (prometheus-client renders it)."""


def metrics_route(loopgate: Loopgate) -> Route:
    token = loopgate.config.admin.token
    auth = TokenAuth(token, "loopgate_metrics") if token else None

    async def metrics(request: Request) -> Response:
        if auth is not None:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not auth.matches(given.strip()):
                return PlainTextResponse(
                    "admin.token required: Authorization: Bearer <admin.token>\n",
                    401,
                    headers={"www-authenticate": 'Bearer realm="loopgate"'},
                )
        body = loopgate.telemetry.metrics.render(await scrape_state(loopgate))
        return Response(body, media_type=CONTENT_TYPE)

    return Route("/metrics", metrics, methods=["GET"])


async def scrape_state(loopgate: Loopgate) -> ScrapeState:
    """What is read at each scrape: active runs, channels, the inbox's backlog, exports."""
    depth: dict[str, int] | None = None
    oldest_age: float | None = None
    if loopgate.inbox is not None:
        try:
            depth, oldest = await loopgate.inbox.backlog()
        except Exception as exc:  # the database is down: the rest is still worth a scrape
            log.warning("metrics.inbox_unreadable", error=str(exc))
        else:
            if oldest is not None:
                oldest_age = max(0.0, (datetime.now(UTC) - oldest).total_seconds())
    states = loopgate.channel_starter.states
    return ScrapeState(
        active_runs=loopgate.registry.active_runs,
        sessions_waiting=loopgate.sessions_waiting_for_slot,
        channels={name: state is ChannelState.UP for name, state in states.items()},
        inbox_depth=depth,
        inbox_oldest_age=oldest_age,
        spans_exported=loopgate.telemetry.spans_exported,
    )
