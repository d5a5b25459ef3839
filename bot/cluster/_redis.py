"""redis-py's asyncio client, imported without OpenTelemetry's metrics.

redis-py 8 imports the OpenTelemetry metrics SDK whenever it is installed (Loopgate installs
OpenTelemetry for its OTLP trace export), for redis-py's own metrics, which Loopgate never turns
on and which redis-py treats as optional: ~2 MiB resident in every clustered process for
nothing. They are hidden for redis-py's first import (a ``None`` entry in ``sys.modules`` makes
an import raise ImportError), then visible again, as ``bot/__init__.py`` does with rich.
"""

from __future__ import annotations

import importlib
import sys

_HIDDEN = ("opentelemetry.metrics", "opentelemetry.sdk.metrics")


def _import_without_metrics() -> None:
    if "redis" in sys.modules:
        return
    hidden = [name for name in _HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        importlib.import_module("redis.asyncio")
    finally:
        for name in hidden:
            del sys.modules[name]


_import_without_metrics()

from redis.asyncio import Redis  # noqa: E402
from redis.asyncio.client import PubSub  # noqa: E402

__all__ = ["PubSub", "Redis"]
