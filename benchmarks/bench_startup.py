"""Benchmark: how long the command line takes to start, against a Python process that does nothing.

Every invocation pays the start-up, so it is what users feel on small inputs and in scripts that
run the command many times. Runs, each as its own subprocess and alternating with the baseline
(``python -c pass``) ``--repeat`` times: ``otel-agent-profiler --help``, ``COMMAND --help`` for
every command, and ``analyze`` of the small example trace (the text report and ``--format json``),
each with its output written to a file. Prints for each the min and median wall time, both as
milliseconds over the baseline's and as a ratio to it, and whether the goals are met (by the
median): at most 60 ms over the baseline for every ``--help`` and 120 ms for ``analyze`` of the
small trace.

``--instructions`` also counts the instructions one run of each executes (valgrind's callgrind
tool, which must be installed), in millions over the baseline's: unlike the times, the counts do
not depend on what else the machine runs.

    python benchmarks/bench_startup.py [--repeat 9] [--instructions]

The command runs as ``python -m otel_agent_profiler``; PYTHONPATH picks which copy of the
package (the benchmark's own environment otherwise).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL_TRACE = ROOT / "examples" / "traces" / "research-agent.otlp.json"
CLI = [sys.executable, "-m", "otel_agent_profiler"]
BASELINE = [sys.executable, "-c", "pass"]
COMMANDS = ("analyze", "export", "diff", "report", "serve")
GOAL_HELP_MS = 60.0
GOAL_ANALYZE_MS = 120.0
# As users run it: with the bytecode caches that installing the package writes (the first, untimed run
# of each command writes them here). Without them every run would compile the modules it imports.
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def cases() -> list[tuple[str, list[str], float]]:
    """(label, argv, goal in milliseconds over the baseline) of every timed invocation."""
    timed = [("--help", [*CLI, "--help"], GOAL_HELP_MS)]
    timed += [(f"{name} --help", [*CLI, name, "--help"], GOAL_HELP_MS) for name in COMMANDS]
    timed.append(("analyze (small trace, text)", [*CLI, "analyze", str(SMALL_TRACE)], GOAL_ANALYZE_MS))
    timed.append(
        ("analyze (small trace, json)", [*CLI, "analyze", "--format", "json", str(SMALL_TRACE)], GOAL_ANALYZE_MS)
    )
    return timed


def wall_time_s(argv: list[str], output: Path) -> float:
    """Wall time of one run of ``argv``, its standard output going to ``output``; fails if it fails."""
    with output.open("wb") as stdout:
        start = time.perf_counter()
        subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, env=ENVIRONMENT, cwd=output.parent, check=True)
        return time.perf_counter() - start


def instructions(argv: list[str], output: Path) -> int:
    """Instructions one run of ``argv`` executes, counted by valgrind's callgrind; fails if it fails."""
    with output.open("wb") as stdout:
        completed = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
            stdout=stdout,
            stderr=subprocess.PIPE,
            # The same hashes every run: the count then repeats to the last few thousand instructions.
            env={**ENVIRONMENT, "PYTHONHASHSEED": "0"},
            cwd=output.parent,
            check=True,
        )
    found = re.search(rb"Collected : (\d+)", completed.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no instruction count for {argv}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs of each command and of the baseline (at least 7)")
    parser.add_argument(
        "--instructions", action="store_true", help="also count each run's instructions (needs valgrind)"
    )
    args = parser.parse_args()
    if args.repeat < 7:
        parser.error("--repeat must be at least 7")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind, which is not installed")
    timed = cases()
    baseline: list[float] = []
    runs: dict[str, list[float]] = {label: [] for label, _, _ in timed}
    with tempfile.TemporaryDirectory() as work:
        output = Path(work) / "stdout"
        # A first run of each, not timed: it warms the file cache and writes the bytecode caches.
        for _, argv, _ in timed:
            wall_time_s(argv, output)
        for _ in range(args.repeat):
            # The baseline before every command, so that a busy moment of the shared machine lands on both.
            for label, argv, _ in timed:
                baseline.append(wall_time_s(BASELINE, output))
                runs[label].append(wall_time_s(argv, output))
        counts = {label: instructions(argv, output) for label, argv, _ in timed} if args.instructions else {}
        base_count = instructions(BASELINE, output) if args.instructions else 0
    base_min, base_median = min(baseline), statistics.median(baseline)
    print(
        f"python -c pass (baseline): min {base_min * 1000:.1f} ms, median {base_median * 1000:.1f} ms "
        f"({len(baseline)} runs)"
    )
    print(f"{'command':<30} {'min over':>9} {'median over':>12} {'min ratio':>10} {'median ratio':>13}  goal")
    for label, _, goal_ms in timed:
        least, middle = min(runs[label]), statistics.median(runs[label])
        over_min_ms, over_median_ms = (least - base_min) * 1000, (middle - base_median) * 1000
        met = over_median_ms <= goal_ms
        print(
            f"{label:<30} {over_min_ms:>6.1f} ms {over_median_ms:>9.1f} ms {least / base_min:>9.2f}x "
            f"{middle / base_median:>12.2f}x  <= {goal_ms:.0f} ms over: {'met' if met else 'missed'}"
        )
    if counts:
        print(f"instructions (valgrind): python -c pass {base_count / 1e6:.0f} million")
        for label, count in counts.items():
            print(f"{label:<30} {(count - base_count) / 1e6:>6.0f} million over = {count / base_count:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
