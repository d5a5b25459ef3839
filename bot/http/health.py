"""What ``GET /healthz`` reports, shared with the dashboard's channel page (:mod:`bot.admin`)."""

from __future__ import annotations

from typing import Any

import structlog
from sqlalchemy import text

from bot.app import Loopgate

log = structlog.get_logger(__name__)


async def health_report(loopgate: Loopgate) -> tuple[dict[str, Any], int]:
    """The health body and its HTTP status: 503 only when the database is unreachable or the
    service is draining."""
    inbox: dict[str, int] = {}
    try:
        if loopgate.inbox is not None:
            counts = await loopgate.inbox.counts()
            inbox = {"depth": sum(counts.values()), **counts}
        else:
            await loopgate.db.run_read(lambda conn: conn.execute(text("SELECT 1")).scalar())
    except Exception as exc:
        log.warning("healthz.database_failed", error=str(exc))
        return {"status": "error", "database": "unreachable"}, 503
    channels = {name: state.value for name, state in loopgate.channel_starter.states.items()}
    # A platform outage degrades the service but is no reason for the PaaS to restart us:
    # still 200, and the channel keeps retrying by itself. Draining is 503, so a load
    # balancer stops sending here.
    mcp = {status.name: status.state.value for status in loopgate.mcp.statuses()}
    degraded = any(state != "up" for state in channels.values()) or loopgate.mcp.degraded
    cluster = loopgate.cluster
    # Redis down: runs in hand go on, but stops and polling cannot be coordinated.
    degraded = degraded or (cluster is not None and cluster.degraded)
    status = "draining" if loopgate.draining else "degraded" if degraded else "ok"
    body: dict[str, Any] = {
        "status": status,
        "database": "ok",
        "active_runs": loopgate.registry.active_runs,
        "channels": channels,
    }
    if mcp:
        body["mcp"] = mcp
    if cluster is not None:
        body.update(cluster.health())
    if loopgate.inbox is not None:
        body["inbox"] = inbox
    return body, 503 if loopgate.draining else 200
