"""Fail when CPU per reply crept up: compare a ``benchmarks/serve.py --out`` result to a baseline.

    python benchmarks/serve.py --out /tmp/serve.json
    python benchmarks/check_regression.py /tmp/serve.json [--baseline FILE]

The baseline defaults to the result's configuration's: benchmarks/baseline_serve.json, or
benchmarks/baseline_serve_all.json for a ``serve.py --all-capabilities`` result. Exit 1 when
``cpu_ms_per_reply`` is more than ``--tolerance`` (default 25 %) above the baseline's; the
other figures are printed
beside their baseline for the reader, not judged (latency and throughput depend on what else
the machine is doing; CPU per reply much less so). Not a timed test on purpose: run it where
the baseline was measured, or refresh the baseline there. To judge one change on a machine
whose speed drifts, compare two commits side by side instead: benchmarks/ab.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parent / "baseline_serve.json"
BASELINES = {"all-capabilities": BASELINE.with_name("baseline_serve_all.json")}
"""By the result's ``configuration``; any other (``plain``, or none: older results) BASELINE."""
JUDGED = "cpu_ms_per_reply"


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
        "--tolerance", type=float, default=0.25, help="allowed growth (0.25: 25 %%)"
    )
    args = parser.parse_args(argv)
    data = json.loads(args.result.read_text())
    path = args.baseline or BASELINES.get(data.get("configuration", ""), BASELINE)
    print(f"baseline: {path.name}")
    result = figures(data)
    baseline = figures(json.loads(path.read_text()))
    for name in sorted(baseline.keys() & result.keys()):
        change = (result[name] / baseline[name] - 1) if baseline[name] else 0.0
        print(f"{name:<28}{baseline[name]:>10}{result[name]:>10}  {change:+.0%}")
    limit = baseline[JUDGED] * (1 + args.tolerance)
    if result[JUDGED] > limit:
        print(
            f"FAIL: {JUDGED} {result[JUDGED]} > {limit:.2f} "
            f"(baseline {baseline[JUDGED]} + {args.tolerance:.0%})"
        )
        return 1
    print(f"OK: {JUDGED} {result[JUDGED]} <= {limit:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
