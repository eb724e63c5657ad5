"""Benchmark: the cross-run analytics (span table, statistics, compare, ...) over 200,000+ spans.

Each stage is timed without tracemalloc, then run again under tracemalloc for its peak memory,
and its time is printed as a ratio to profiling the same spans (the baseline, measured in the
same run). Goal: each stage under 10 s on a 2-core machine.

    python benchmarks/bench_analytics.py [--spans 200000]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_traces import generate_spans, otlp_document

from otel_agent_profiler import profile_records
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import (
    call_sequences,
    category_statistics,
    compare_runs,
    concurrency_distribution,
    concurrency_spikes,
    fit_forecaster,
    frequent_ngrams,
    operation_statistics,
    span_table,
    throughput,
    trace_statistics,
)

GOAL_S = 10.0


def profiles_of(min_spans: int, seed: int):  # type: ignore[no-untyped-def]
    data = json.dumps(otlp_document(generate_spans(min_spans, seed=seed))).encode()
    records = parse_trace_bytes(data, "bench").records
    started = time.perf_counter()
    profiles = profile_records(records)
    profiling_s = time.perf_counter() - started
    for profile in profiles:
        profile.release()
    return profiles, profiling_s


BASELINE_S = 1.0


def measure(label: str, function):  # type: ignore[no-untyped-def]
    gc.collect()
    started = time.perf_counter()
    result = function()
    elapsed = time.perf_counter() - started
    del result
    gc.collect()
    tracemalloc.start()
    result = function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    verdict = "ok" if elapsed < GOAL_S else f"over the {GOAL_S:g} s goal"
    print(
        f"{label:<56} {elapsed:6.2f} s = {elapsed / BASELINE_S:5.2f}x profiling  peak {peak / 1e6:7.1f} MB  {verdict}"
    )
    return result


def main() -> None:
    global BASELINE_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans per run set (default: %(default)s)")
    args = parser.parse_args()
    baseline, BASELINE_S = profiles_of(args.spans, seed=7)
    candidate, _ = profiles_of(args.spans, seed=8)
    n_base = sum(p.span_count for p in baseline)
    n_cand = sum(p.span_count for p in candidate)
    print(f"baseline {n_base:,} spans in {len(baseline):,} traces; candidate {n_cand:,} spans in {len(candidate):,}")
    print(f"baseline for the ratios: profiling the {n_base:,} spans took {BASELINE_S:.2f} s")
    table = measure(f"span_table ({n_base:,} spans)", lambda: span_table(baseline))
    other = span_table(candidate)

    def stats():
        return (
            category_statistics(table),
            operation_statistics(table),
            trace_statistics(table),
            throughput(table, operations=True),
        )

    measure("statistics (category + operation + trace + throughput)", stats)
    comparison = measure(f"compare_runs (tables of {n_base:,} vs {n_cand:,} spans)", lambda: compare_runs(table, other))
    measure(
        "span_table x2 + compare_runs, from profiles",
        lambda: compare_runs(span_table(baseline), span_table(candidate)),
    )
    measure("concurrency_distribution (overall + per trace)", lambda: concurrency_distribution(table))
    measure("concurrency_spikes (overall, threshold 20)", lambda: concurrency_spikes(table, 20))
    measure(
        "call_sequences + frequent_ngrams (n = 2, 3, 4)",
        lambda: (call_sequences(table), frequent_ngrams(table, n=[2, 3, 4])),
    )
    forecaster = measure("fit_forecaster (5-fold cross-validation)", lambda: fit_forecaster(table))
    print()
    regressions = len(comparison.regressions)
    print(f"compare: {len(comparison.table)} rows, {regressions} regressions, exit code {comparison.exit_code}")
    print(forecaster.evaluation.to_string(index=False))


if __name__ == "__main__":
    main()
