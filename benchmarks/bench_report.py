"""Benchmark: `otel-agent-profiler report` over 200,000+ spans, end to end, and the size of one big trace's page.

Generates an OTLP JSON file of synthetic agent runs and times the `report` command on it as a
user runs it (a subprocess), once with `--html` alone and once with `--summary-json` as well,
with the peak memory of each. Baseline, measured in the same run: reading and profiling the
same file in this process (the least any command looking at it must do). Then the HTML for one
trace of 2,000+ spans, whose size is the other goal. Goals: under 10 s on a 2-core machine, and
under 5 MB for the 2,000-span trace.

    python benchmarks/bench_report.py [--spans 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_spans, one_big_trace_document, otlp_document

from otel_agent_profiler import profile_records
from otel_agent_profiler.adapters import read_trace_file
from otel_agent_profiler.offline import cyclic_gc_paused

GOAL_S = 10.0
GOAL_PAGE_MB = 5.0
CLI = str(Path(sys.executable).with_name("otel-agent-profiler"))


def _timed(command: list[str]) -> tuple[float, float]:
    """Wall time of ``command`` and its peak resident memory (MB); each run is its own child."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans in the file (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        work = Path(workdir)
        source = work / "runs.json"
        source.write_text(json.dumps(otlp_document(generate_spans(args.spans, seed=7))))
        with cyclic_gc_paused():
            started = time.perf_counter()
            profiles = profile_records(read_trace_file(str(source)).records)
            baseline_s = time.perf_counter() - started
        spans = sum(p.span_count for p in profiles)
        del profiles
        page = work / "report.html"
        html_s, html_mb = _timed([CLI, "report", str(source), "--html", str(page), "--no-progress"])
        page_mb = page.stat().st_size / 1e6
        summary = work / "summary.json"
        both_s, both_mb = _timed(
            [CLI, "report", str(source), "--html", str(page), "--summary-json", str(summary), "--no-progress"]
        )
        summary_mb = summary.stat().st_size / 1e6

        big = work / "big-trace.json"
        big.write_text(json.dumps(one_big_trace_document(2000)))
        big_page = work / "big-trace.html"
        _timed([CLI, "report", str(big), "--html", str(big_page), "--no-progress"])
        document = json.loads(big.read_text())
        big_spans = sum(len(scope["spans"]) for rs in document["resourceSpans"] for scope in rs["scopeSpans"])
        big_mb = big_page.stat().st_size / 1e6

    def verdict(seconds: float) -> str:
        return "ok" if seconds < GOAL_S else f"over the {GOAL_S:g} s goal"

    print(f"{spans:,} spans in one file")
    print(f"  baseline: read + profile in-process          {baseline_s:6.2f} s")
    print(
        f"  report --html, end to end                    {html_s:6.2f} s = {html_s / baseline_s:.2f}x  "
        f"{verdict(html_s)}; peak {html_mb:,.0f} MB; page {page_mb:.2f} MB"
    )
    print(
        f"  report --html --summary-json, end to end     {both_s:6.2f} s = {both_s / baseline_s:.2f}x  "
        f"{verdict(both_s)}; peak {both_mb:,.0f} MB; summary {summary_mb:.1f} MB"
    )
    size_verdict = "ok" if big_mb < GOAL_PAGE_MB else f"over the {GOAL_PAGE_MB:g} MB goal"
    print(f"one trace of {big_spans:,} spans: page {big_mb:.2f} MB  {size_verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
