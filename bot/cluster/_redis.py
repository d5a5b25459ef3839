"""redis-py's asyncio client, imported without OpenTelemetry's metrics nor cryptography.

redis-py treats both as optional and imports them whenever they are installed:

- the OpenTelemetry metrics SDK (Loopgate installs OpenTelemetry for its OTLP trace export), for
  redis-py's own metrics, which Loopgate never turns on: ~2 MiB;
- ``cryptography`` (installed for the MCP SDK's ``pyjwt[crypto]``), only to know whether the
  *synchronous* client may validate a TLS server's OCSP staple (``ssl_validate_ocsp``); the
  asyncio client Loopgate uses has no OCSP at all: ~6.5 MiB, its Rust extension.

Both are hidden for redis-py's first import (a ``None`` entry in ``sys.modules`` makes an import
raise ImportError), then visible again, as ``bot/__init__.py`` does with rich and
``channels/telegram/_ptb.py`` with cryptography. That is ~8 MiB resident in every clustered
process for nothing.
"""

from __future__ import annotations

import sys

from bot import import_hiding

if "redis" not in sys.modules:
    import_hiding(
        ("redis.asyncio",),
        ("opentelemetry.metrics", "opentelemetry.sdk.metrics", "cryptography"),
    )

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

__all__ = ["PubSub", "Redis"]
