"""Benchmark: `otel-agent-profiler diff` over two sets of 200,000+ spans, end to end.

Generates two OTLP JSON files of synthetic agent runs and times the `diff` command on them as a
user runs it (a subprocess: reading, profiling, span tables, the comparison), with its peak
memory. Baseline, measured in the same run: reading and profiling the same two files in this
process (the least any command looking at them must do). Goal: under 10 s on a 2-core machine.

    python benchmarks/bench_diff.py [--spans 200000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_spans, otlp_document

from otel_agent_profiler.adapters import read_trace_file
from otel_agent_profiler.core import profile_records
from otel_agent_profiler.offline import cyclic_gc_paused

GOAL_S = 10.0
CLI = str(Path(sys.executable).with_name("otel-agent-profiler"))


def _timed(command: list[str]) -> tuple[float, float]:
    """Wall time of ``command`` and the peak resident memory (MB) of its biggest process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    peak_kb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return elapsed, peak_kb / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans per side (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        paths = []
        for name, seed in (("baseline", 7), ("candidate", 8)):
            path = Path(workdir) / f"{name}.json"
            path.write_text(json.dumps(otlp_document(generate_spans(args.spans, seed=seed))))
            paths.append(str(path))
        diff_s, diff_mb = _timed([CLI, "diff", *paths])
        with cyclic_gc_paused():
            started = time.perf_counter()
            for path in paths:
                profile_records(read_trace_file(path).records)
            baseline_s = time.perf_counter() - started
    verdict = "ok" if diff_s < GOAL_S else f"over the {GOAL_S:g} s goal"
    print(f"two sets of {args.spans:,}+ spans")
    print(f"  baseline: read + profile both files in-process {baseline_s:6.2f} s")
    print(f"  diff, end to end                               {diff_s:6.2f} s = {diff_s / baseline_s:.2f}x  {verdict}")
    print(f"  diff peak memory of its largest process        {diff_mb:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
