"""uvicorn, imported and configured the way ``loopgate serve`` wants it.

- **Without watchfiles.** uvicorn's package import loads its reload supervisors, which import
  watchfiles (a Rust extension, ~1.4 MiB resident) whenever it is installed (``uvicorn[standard]``
  brings it); Loopgate never runs uvicorn's reloader. It is hidden for uvicorn's first import (a
  ``None`` entry in ``sys.modules`` makes an import raise ImportError), then visible again, as
  ``bot/cluster/_redis.py`` does with OpenTelemetry's metrics.
- **The websocket protocol with the first websocket.** uvicorn imports its websocket protocol
  (the websockets library, ~3 MiB) when it loads its configuration; here it is imported when the
  first connection asks to upgrade (the web chat's ``/ws``), so a deployment whose users are all
  on Telegram or Slack never loads it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, cast

from bot import import_hiding

if "uvicorn" not in sys.modules:
    import_hiding(("uvicorn",), ("watchfiles",))

import uvicorn
from starlette.types import ASGIApp

from bot.config import Config

__all__ = ["server_config", "uvicorn"]


def _websocket_protocol(**kwargs: Any) -> asyncio.Protocol:
    """uvicorn's own choice of websocket protocol (``ws="auto"``), imported on first use."""
    from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

    if AutoWebSocketsProtocol is None:  # neither websockets nor wsproto installed
        raise RuntimeError("no websocket library installed (pip install websockets)")
    return AutoWebSocketsProtocol(**kwargs)


def server_config(app: ASGIApp, config: Config) -> uvicorn.Config:
    """How ``loopgate serve`` runs ``app``: behind a proxy, with the app's lifespan."""
    return uvicorn.Config(
        app,
        host=config.server.host,
        port=config.server.port,
        log_config=None,
        proxy_headers=True,
        forwarded_allow_ips=config.server.forwarded_allow_ips,
        lifespan="on",
        # uvicorn instantiates ws_protocol_class per upgrade: any callable returning the protocol
        ws=cast("type[asyncio.Protocol]", _websocket_protocol),
        ws_max_size=config.server.max_ws_message_bytes,
    )
