"""``loopgate serve`` under cProfile, switched on and off by signals (for ``serve.py --profile``).

    python benchmarks/profiled_serve.py serve --config config.yaml --port 8080

SIGUSR1 starts a fresh profile, SIGUSR2 stops it and writes it to ``$LOOPGATE_PROFILE_OUT`` (a
pstats file), so only the measured phase is profiled, not start-up or warm-up. The event loop
runs in the main thread, where Python runs signal handlers, so the profiler sees its work. Its
clock is the main thread's CPU time: waiting in epoll costs nothing, as in reality; the
database's worker thread (aiosqlite) is not profiled at all.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.cli import main

_profiler: cProfile.Profile | None = None


def _start(signum: int, frame: FrameType | None) -> None:
    global _profiler
    _profiler = cProfile.Profile(time.thread_time)
    _profiler.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    global _profiler
    if _profiler is None:
        return
    _profiler.disable()
    out = os.environ.get("LOOPGATE_PROFILE_OUT", "serve.prof")
    _profiler.dump_stats(out + ".part")
    os.replace(out + ".part", out)  # the benchmark waits for the file: never a half-written one
    _profiler = None


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    raise SystemExit(main(sys.argv[1:]))
