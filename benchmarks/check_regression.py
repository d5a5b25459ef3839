"""Fail when CPU per reply or memory crept up: compare a ``benchmarks/serve.py --out`` result to a
baseline.

    python benchmarks/serve.py --out /tmp/serve.json
    python benchmarks/check_regression.py /tmp/serve.json [--baseline FILE]

The baseline defaults to the result's configuration's: benchmarks/baseline_serve.json,
benchmarks/baseline_serve_all.json for a ``serve.py --all-capabilities`` result, or
benchmarks/baseline_serve_long.json for a ``serve.py --long-chats`` one. Exit 1 when
``cpu_ms_per_reply`` is more than ``--tolerance`` (default 25 %) above the baseline's, or
``peak_rss_mib`` more than ``--rss-tolerance`` (default 3 %) above it; the other figures are
printed beside their baseline for the reader, not judged (latency and throughput depend on what
else the machine is doing; CPU per reply much less so, the peak memory hardly at all). Not a
timed test on purpose: run it where the baseline was measured, or refresh the baseline there.
To judge one change on a machine whose speed drifts, compare two commits side by side instead:
benchmarks/ab.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parent / "baseline_serve.json"
BASELINES = {
    "plain": BASELINE,
    "": BASELINE,  # results written before serve.py named its configuration
    "all-capabilities": BASELINE.with_name("baseline_serve_all.json"),
    "plain, long chats": BASELINE.with_name("baseline_serve_long.json"),
}
"""By the result's ``configuration``; another one needs ``--baseline``."""
JUDGED = {"cpu_ms_per_reply": "tolerance", "peak_rss_mib": "rss_tolerance"}
"""The figures judged, each with the option holding its allowed growth."""


def figures(data: dict[str, Any]) -> dict[str, float]:
    flat = {k: v for k, v in data.items() if isinstance(v, int | float)}
    flat.update({f"latency {k}": v for k, v in (data.get("latency_ms") or {}).items()})
    return flat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("result", type=Path, help="JSON written by serve.py --out")
    parser.add_argument("--baseline", type=Path, help="default: the configuration's own")
    parser.add_argument(
        "--tolerance", type=float, default=0.25, help="allowed CPU growth (0.25: 25 %%)"
    )
    parser.add_argument(
        "--rss-tolerance", type=float, default=0.03, help="allowed peak RSS growth (0.03: 3 %%)"
    )
    args = parser.parse_args(argv)
    data = json.loads(args.result.read_text())
    configuration = data.get("configuration", "")
    path = args.baseline or BASELINES.get(configuration)
    if path is None:
        parser.error(f"no baseline for the configuration {configuration!r}: pass --baseline")
    print(f"baseline: {path.name}")
    result = figures(data)
    baseline = figures(json.loads(path.read_text()))
    for name in sorted(baseline.keys() & result.keys()):
        change = (result[name] / baseline[name] - 1) if baseline[name] else 0.0
        print(f"{name:<28}{baseline[name]:>10}{result[name]:>10}  {change:+.0%}")
    failed = False
    for name, option in JUDGED.items():
        tolerance = getattr(args, option)
        limit = baseline[name] * (1 + tolerance)
        verdict = "FAIL" if result[name] > limit else "OK"
        failed |= verdict == "FAIL"
        print(
            f"{verdict}: {name} {result[name]} against {limit:.2f} "
            f"(baseline {baseline[name]} + {tolerance:.0%})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
