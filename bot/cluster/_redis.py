"""redis-py's asyncio client, imported without OpenTelemetry's metrics.

redis-py 8 imports the OpenTelemetry metrics SDK whenever it is installed (Loopgate installs
OpenTelemetry for its OTLP trace export), for redis-py's own metrics, which Loopgate never turns
on and which redis-py treats as optional: ~2 MiB resident in every clustered process for
nothing. They are hidden for redis-py's first import (a ``None`` entry in ``sys.modules`` makes
an import raise ImportError), then visible again, as ``bot/__init__.py`` does with rich.
"""

from __future__ import annotations

import sys

from bot import import_hiding

if "redis" not in sys.modules:
    import_hiding(("redis.asyncio",), ("opentelemetry.metrics", "opentelemetry.sdk.metrics"))

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

__all__ = ["PubSub", "Redis"]
