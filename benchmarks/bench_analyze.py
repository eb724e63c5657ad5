"""Benchmark: offline analysis throughput against plain ``json`` parsing of the same file.

Generates a large OTLP JSON file of synthetic agent runs (see agent_traces.py), then times,
alternating and repeated, in this one process:

* the baseline: reading the file and ``json.loads`` on it;
* the analysis the CLI runs: reading the file, turning it into span records, profiling them.

Both run with the cyclic garbage collector paused, as the CLI runs; the baseline with the
collector on is printed too, for context. Figures are medians.

    python benchmarks/bench_analyze.py [--spans 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_spans, otlp_document

from otel_agent_profiler.adapters import read_trace_file
from otel_agent_profiler.core import profile_records
from otel_agent_profiler.offline import cyclic_gc_paused

GOAL_SPANS_PER_S = 200_000
GOAL_RATIO = 2.0


def _baseline(path: Path) -> float:
    with cyclic_gc_paused():
        started = time.perf_counter()
        document = json.loads(path.read_bytes())
        elapsed = time.perf_counter() - started
    del document
    return elapsed


def _analysis(path: Path) -> tuple[float, float, int, int]:
    with cyclic_gc_paused():
        started = time.perf_counter()
        trace_file = read_trace_file(path)
        loaded = time.perf_counter()
        profiles = profile_records(trace_file.records)
        finished = time.perf_counter()
    if trace_file.problems:
        raise SystemExit(f"benchmark input unreadable: {trace_file.problems[:3]}")
    spans, traces = len(trace_file.records), len(profiles)
    del trace_file, profiles
    gc.collect()
    return loaded - started, finished - loaded, spans, traces


def run(span_target: int, repeat: int, content: bool, workdir: Path) -> dict[str, float]:
    path = workdir / f"agents-{span_target}-{'content' if content else 'plain'}.json"
    path.write_text(json.dumps(otlp_document(generate_spans(span_target, content=content))))
    size_mb = path.stat().st_size / 1e6

    _baseline(path)  # warm-up: the first large allocation of a process is slower
    baselines, loads, analyses = [], [], []
    spans = traces = 0
    for _ in range(repeat):
        baselines.append(_baseline(path))
        load, analysis, spans, traces = _analysis(path)
        loads.append(load)
        analyses.append(analysis)
    gc.collect()
    started = time.perf_counter()
    json.loads(path.read_bytes())
    baseline_gc_on = time.perf_counter() - started

    baseline = statistics.median(baselines)
    load = statistics.median(loads)
    analysis = statistics.median(analyses)
    total = load + analysis
    label = "with prompt/completion content" if content else "without content"
    print(f"\n{spans:,} spans in {traces:,} traces, {size_mb:.1f} MB of OTLP JSON ({label}); median of {repeat}")
    print(f"  baseline: read + json.loads                     {baseline:7.2f} s")
    print(
        f"  analysis: read + convert to records + profile   {total:7.2f} s   = {total / baseline:.2f}x baseline"
        f"  (goal < {GOAL_RATIO:g}x)"
    )
    print(f"    read + convert {load:.2f} s, profile {analysis:.2f} s")
    print(f"  profiling throughput  {spans / analysis:>10,.0f} spans/s  (goal >= {GOAL_SPANS_PER_S:,})")
    print(f"  end-to-end throughput {spans / total:>10,.0f} spans/s  (file to profiles)")
    print(
        f"  context: json.loads with the garbage collector on took {baseline_gc_on:.2f} s"
        f" ({total / baseline_gc_on:.2f}x)"
    )
    path.unlink()
    return {"ratio": total / baseline, "profile_spans_per_s": spans / analysis, "e2e_spans_per_s": spans / total}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans to generate (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (default: %(default)s)")
    parser.add_argument("--variant", choices=("plain", "content", "both"), default="both", help="span content variant")
    args = parser.parse_args()
    variants = {"plain": [False], "content": [True], "both": [False, True]}[args.variant]
    with tempfile.TemporaryDirectory() as workdir:
        for content in variants:
            run(args.spans, args.repeat, content, Path(workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
