"""Two commits side by side on this machine: CPU per reply of ``before`` against ``after``.

This machine's speed drifts by up to 1.5x between hours, so a figure compared with a baseline
measured at another time says little. This runs ``benchmarks/serve.py`` on both commits in
turn (before, after, before, after, ...), each from its own clean ``git worktree`` with its own
copy of the benchmark, and compares the medians: both sides see the same hour.

    python benchmarks/ab.py BEFORE [--after REF] [--runs 3] [--tolerance 0.25] [-- SERVE_ARGS]
    python benchmarks/ab.py 13f2371                  # that commit against HEAD
    python benchmarks/ab.py HEAD --after .           # HEAD against the working tree as it is
    python benchmarks/ab.py HEAD~5 -- --chats 50     # arguments after -- go to serve.py
    python benchmarks/ab.py ff826ab --after-args=--all-capabilities --tolerance 0.10
                                # issue 33's budget: every capability configured, against
                                # the plain benchmark before them

Prints each run, a table of medians and one JSON line; ``--out`` also writes the JSON. Exit 1
when the after side's median CPU per reply is more than ``--tolerance`` above the before
side's, or, with ``--rss-tolerance``, its median peak RSS more than that above (not judged by
default: ``--after-args`` may configure more on one side). Both sides run with this interpreter
(this checkout's virtualenv). Arguments after ``--`` go to both sides' own copy of serve.py: for
a commit older than ``--long-chats``, spell it ``-- --chats 50 --per-chat 200``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
JUDGED = "cpu_ms_per_reply"
RSS = "peak_rss_mib"
SIDES = ("before", "after")


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def checkout(ref: str, where: Path) -> Path:
    """A clean worktree of ``ref`` at ``where``; ``.`` is this checkout as it is."""
    if ref == ".":
        return ROOT
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"ab.py: {ref!r} is not a commit of this repository") from None
    git("worktree", "add", "--detach", str(where), commit)
    return where


def measure(tree: Path, ref: str, out: Path, serve_args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "benchmarks/serve.py", "--out", str(out), *serve_args],
        cwd=tree,
        stdout=subprocess.DEVNULL,
    )
    if done.returncode != 0:  # its own error is above, on stderr
        raise SystemExit(f"ab.py: benchmarks/serve.py failed on {ref} (exit {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The medians of the figures a reader compares."""
    figures = {
        "cpu_ms_per_reply": [r["cpu_ms_per_reply"] for r in runs],
        "p50_ms": [r["latency_ms"]["p50"] for r in runs],
        "p99_ms": [r["latency_ms"]["p99"] for r in runs],
        "throughput_rps": [r["throughput_rps"] for r in runs],
        "peak_rss_mib": [r["peak_rss_mib"] for r in runs],
    }
    return {name: round(statistics.median(values), 2) for name, values in figures.items()}


def describe(run: dict[str, Any]) -> str:
    return (
        f"CPU {run['cpu_ms_per_reply']} ms/reply, p50 {run['latency_ms']['p50']} ms, "
        f"p99 {run['latency_ms']['p99']} ms, {run['throughput_rps']} replies/s, "
        f"peak {run['peak_rss_mib']} MiB"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    serve_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, serve_args = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("before", help="a commit, branch or tag")
    parser.add_argument("--after", default="HEAD", help="a commit, or . for the working tree")
    parser.add_argument("--runs", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument(
        "--tolerance", type=float, default=0.25, help="allowed growth (0.25: 25 %%)"
    )
    parser.add_argument(
        "--rss-tolerance",
        type=float,
        help="also judge the median peak RSS: allowed growth (0.03: 3 %%); default: not judged",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    parser.add_argument(
        "--after-args",
        default="",
        help="more serve.py arguments for the after side only (e.g. --all-capabilities)",
    )
    args = parser.parse_args(argv)
    side_args = {"before": serve_args, "after": serve_args + shlex.split(args.after_args)}

    refs = {"before": args.before, "after": args.after}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="loopgate-ab-") as tmp:
        trees: dict[str, Path] = {}
        try:
            for side in SIDES:
                trees[side] = checkout(refs[side], Path(tmp) / side)
            for n in range(args.runs):
                for side in SIDES:
                    out = Path(tmp) / f"{side}-{n}.json"
                    runs[side].append(measure(trees[side], refs[side], out, side_args[side]))
                    print(f"{side} run {n + 1} ({refs[side]}): {describe(runs[side][-1])}")
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    git("worktree", "remove", "--force", str(tree))

    medians = {side: summary(runs[side]) for side in SIDES}
    print(f"\n{'median of ' + str(args.runs):<22}{'before':>12}{'after':>12}{'change':>10}")
    for name in medians["before"]:
        was, now = medians["before"][name], medians["after"][name]
        change = f"{now / was - 1:+.0%}" if was else ""
        print(f"{name:<22}{was:>12}{now:>12}{change:>10}")
    ratio = medians["after"][JUDGED] / medians["before"][JUDGED]
    rss_ratio = medians["after"][RSS] / medians["before"][RSS]
    line = json.dumps(
        {
            "refs": refs,
            "args": side_args,
            "medians": medians,
            "runs": runs,
            "cpu_ratio": ratio,
            "rss_ratio": rss_ratio,
        }
    )
    print(line)
    if args.out is not None:
        args.out.write_text(line + "\n")
    verdicts = [(JUDGED, ratio, args.tolerance)]
    if args.rss_tolerance is not None:
        verdicts.append((RSS, rss_ratio, args.rss_tolerance))
    failed = False
    for name, value, tolerance in verdicts:
        if value > 1 + tolerance:
            failed = True
            print(f"FAIL: {name} {value:.2f}x the before side's (allowed {1 + tolerance:.2f}x)")
        else:
            print(f"OK: {name} {value:.2f}x the before side's")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
