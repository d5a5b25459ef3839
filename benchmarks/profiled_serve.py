"""``loopgate serve`` under cProfile, switched on and off by signals (for ``serve.py --profile``).

    python benchmarks/profiled_serve.py serve --config config.yaml --port 8080

SIGUSR1 starts a fresh profile, SIGUSR2 stops it and writes it to ``$LOOPGATE_PROFILE_OUT`` (a
pstats file), so only the measured phase is profiled, not start-up or warm-up. The event loop
runs in the main thread, where Python runs signal handlers, so the profiler sees its work. Its
clock is the main thread's CPU time: waiting in epoll costs nothing, as in reality; the
database's worker thread (aiosqlite) is not profiled at all.

With ``LOOPGATE_PROFILE_SAMPLE=1`` a sampler thread records the main thread's stack every
millisecond instead (written as "file:function;file:function... count" lines): no per-call
overhead, so the shares are not skewed towards code that makes many small Python calls, as
cProfile's are.
"""

from __future__ import annotations

import collections
import cProfile
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.cli import main

_profiler: cProfile.Profile | None = None
_sampler: threading.Thread | None = None
_sampling = threading.Event()
_samples: collections.Counter[str] = collections.Counter()


def _sample(main_id: int) -> None:
    while _sampling.is_set():
        frame = sys._current_frames().get(main_id)
        stack = []
        while frame is not None:
            code = frame.f_code
            stack.append(f"{code.co_filename}:{code.co_name}")
            frame = frame.f_back
        _samples[";".join(reversed(stack))] += 1
        time.sleep(0.001)


def _out() -> str:
    return os.environ.get("LOOPGATE_PROFILE_OUT", "serve.prof")


def _start(signum: int, frame: FrameType | None) -> None:
    global _profiler, _sampler
    if os.environ.get("LOOPGATE_PROFILE_SAMPLE"):
        _samples.clear()
        _sampling.set()
        _sampler = threading.Thread(target=_sample, args=(threading.get_ident(),), daemon=True)
        _sampler.start()
        return
    _profiler = cProfile.Profile(time.thread_time)
    _profiler.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    global _profiler, _sampler
    out = _out()
    if _sampler is not None:
        _sampling.clear()
        _sampler.join()
        _sampler = None
        lines = [f"{stack} {count}\n" for stack, count in _samples.most_common()]
        Path(out + ".part").write_text("".join(lines))
        os.replace(out + ".part", out)
        return
    if _profiler is None:
        return
    _profiler.disable()
    _profiler.dump_stats(out + ".part")
    os.replace(out + ".part", out)  # the benchmark waits for the file: never a half-written one
    _profiler = None


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    raise SystemExit(main(sys.argv[1:]))
