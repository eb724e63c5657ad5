"""The benchmarks run and print their figures (their timings are checked by reading them, not here)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT


def bench(script: str, *args: str) -> str:
    """Run ``benchmarks/<script>`` with ``args``; its standard output (it must exit 0)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout


@pytest.mark.e2e
def test_analysis_benchmark_prints_ratio_and_throughput() -> None:
    out = bench("bench_analyze.py", "--spans", "2000", "--repeat", "1")
    assert re.search(r"= \d+\.\d\dx baseline", out), out
    assert re.search(r"profiling throughput\s+[\d,]+ spans/s", out), out
    assert "without content" in out and "with prompt/completion content" in out
    spans = int(re.search(r"^([\d,]+) spans in", out, re.M).group(1).replace(",", ""))
    assert spans >= 2000


@pytest.mark.e2e
def test_cli_benchmark_prints_every_command_as_ratios_to_json_load() -> None:
    out = bench("bench_cli.py", "--spans", "2000", "--repeat", "2", "--json-lines", "3000")
    assert out.count("json.load (baseline)") == 2, out
    # The lean export has few bytes a span (the content-heavy one many).
    lean = re.search(r"of OTLP JSON \(lean: .+, (\d+) bytes a span\)", out)
    content = re.search(r"of OTLP JSON \(heavy, with prompt and completion content, (\d+) bytes a span\)", out)
    assert lean and content and int(lean.group(1)) <= 370 < 1000 < int(content.group(1)), out
    for command in (
        "analyze --format json > FILE",
        "analyze --format json --output",
        "analyze (text report) > FILE",
        "analyze --format json, 1 worker",
        "analyze (text), 1 worker",
        "export --format speedscope",
        "report --summary-json",
        "report --html",
        "diff FILE FILE",
    ):
        figures = re.findall(
            re.escape(command) + r"\s+[\d.]+ / +[\d.]+ s = [\d.]+x / [\d.]+x +[\d,]+ / +[\d,]+ spans/s"
            r"  peak [\d,]+ MB = [\d.]+x  (goals met|goal missed: .+)$",
            out,
            re.M,
        )
        assert len(figures) == 2, (command, out)
    spans = [int(n.replace(",", "")) for n in re.findall(r"^([\d,]+) spans, [\d.]+ MB of OTLP JSON \(", out, re.M)]
    assert len(spans) == 2 and min(spans) >= 2000, out
    # The JSON Lines export, profiled on disk.
    assert re.search(r"^[\d,]+ spans, [\d,]+ MB of OTLP JSON Lines", out, re.M), out
    for command in ("analyze --format json (on disk)", "analyze (text report, on disk)"):
        assert re.search(
            re.escape(command) + r"\s+[\d.]+ / +[\d.]+ s = [\d.]+x / [\d.]+x +[\d,]+ / +[\d,]+ spans/s"
            r"  peak [\d,]+ MB  goal (met|missed)$",
            out,
            re.M,
        ), (command, out)


@pytest.mark.e2e
def test_cli_benchmark_runs_the_chosen_commands_before_and_after() -> None:
    # Each command also run by another copy of the package (here the same one).
    out = bench("bench_cli.py", "--spans", "1000", "--repeat", "1", "--variant", "lean", "--only", "report --html",
                "--before", str(ROOT))  # fmt: skip
    assert re.search(r"^  report --html \s+[\d.]+ / ", out, re.M), out
    assert re.search(r"^  report --html \[before\] \s+[\d.]+ / ", out, re.M), out
    assert not re.search(r"^  (diff FILE FILE|report --summary-json|analyze)", out, re.M), out


@pytest.mark.e2e
def test_overhead_benchmark_prints_ratios_for_both_workloads() -> None:
    out = bench("bench_overhead.py", "--traces", "60", "--repeat", "1")
    # Two workloads, each exported nowhere and over OTLP to a real collector, steady and saturated.
    assert out.count("total CPU          ") == 16, out
    assert len(re.findall(r"-> [+-]\d+\.\d\dx extra", out)) == 32, out
    assert out.count("exported to OTLP/gRPC to a real collector") == 4, out
    assert out.count(", steady (a 5 ms pause after every 100 spans)") == 4, out
    assert out.count(", saturated (a tight loop; the profiler falls behind)") == 4, out
    assert re.search(r"memory per buffered span: [\d,]+ bytes", out), out


@pytest.mark.e2e
def test_live_realistic_benchmark_prints_process_and_application_thread_ratios_to_the_bare_pipeline() -> None:
    # It exits 1 when a run did not export every span to the collector.
    out = bench("bench_live_realistic.py", "--spans", "1200", "--repeat", "1", "--variants", "all", "--pause-ms", "1")
    assert (
        "1,200 spans per run (100 agent traces of 12 spans), exported over OTLP/gRPC to rotel, "
        "the application pausing 1 ms after each trace;"
    ) in out, out
    figures = r" +[\d.]+ / +[\d.]+ us/span -> [+-]\d+\.\d\dx / [+-]\d+\.\d\dx extra \(goal <= \+{}x\)$"
    # Four profiled variants (defaults, metrics off, enriched spans off, both off), each against the bare pipeline.
    assert len(re.findall("process CPU" + figures.format(r"0\.60"), out, re.M)) == 4, out
    assert len(re.findall("application thread" + figures.format(r"0\.10"), out, re.M)) == 4, out
    # The collector's time, by thread, for the bare pipeline and the four profiled variants.
    collections = re.findall(
        r"^ +garbage collection +([\d.]+) us/span at the median: ([\d.]+) on the application's thread, "
        r"([\d.]+) on the worker, ([\d.]+) on the exporting thread$",
        out,
        re.M,
    )
    assert len(collections) == 5, out
    # 1,200 spans allocate enough to set collections off; without the profiler none runs on its worker.
    assert float(collections[0][0]) > 0 and float(collections[0][2]) == 0.0, out
    # One run each: its total holds the three threads' shares (and any other thread's).
    for total, *shares in collections:
        assert float(total) >= sum(map(float, shares)) - 0.2, out


@pytest.mark.e2e
def test_live_attributes_benchmark_prints_both_settings_and_essential_adds_fewer_attributes() -> None:
    out = bench("bench_live_attributes.py", "--traces", "10", "--repeat", "1")
    assert "120 spans (10 agent traces of 12 spans)" in out, out
    added = {mode: float(count) for mode, count in re.findall(r"span_attributes=(\w+): ([\d.]+) attributes added", out)}
    assert set(added) == {"all", "essential"} and added["essential"] < added["all"], out
    assert len(re.findall(r"^ +OTLP encoding of the copies +[\d.]+ / +[\d.]+ us/span$", out, re.M)) == 2, out


@pytest.mark.e2e
def test_demo_overhead_benchmark_prints_the_ratio() -> None:
    out = bench("bench_demo_overhead.py", "--runs", "1")
    assert re.search(r"wall-clock overhead [+-]\d+\.\d\d%", out), out


@pytest.mark.e2e
def test_analytics_and_diff_benchmarks_print_their_figures() -> None:
    analytics = bench("bench_analytics.py", "--spans", "3000")
    assert len(re.findall(r"x profiling\s+peak\s+[\d.]+ MB", analytics)) == 8, analytics
    diff = bench("bench_diff.py", "--spans", "3000")
    assert re.search(r"diff, end to end\s+[\d.]+ s = [\d.]+x", diff), diff
    report = bench("bench_report.py", "--spans", "3000")
    assert re.search(r"report --html, end to end\s+[\d.]+ s = [\d.]+x .*peak [\d,]+ MB; page [\d.]+ MB", report), report
    assert re.search(r"--summary-json, end to end\s+[\d.]+ s = [\d.]+x .*summary [\d.]+ MB", report), report
    assert re.search(r"one trace of 2,\d{3} spans: page [\d.]+ MB  ok", report), report


@pytest.mark.e2e
def test_serve_soak_benchmark_prints_the_rss_ratio_and_what_was_delivered() -> None:
    out = bench(
        "bench_serve_soak.py", "--duration", "6", "--rate", "1000", "--sample-interval", "0.25", "--pool-spans", "2000"
    )
    rss = r"^RSS: first half [\d.]+ MB .* = \d+\.\d\dx \(plateau: (yes|NO), goal <= 1\.10x\)"
    assert re.search(rss, out, re.M), out
    assert re.search(r"^rate: [\d,]+ spans/s achieved = \d\.\d\dx the target$", out, re.M), out
    counts = r"^spans: sent ([\d,]+) \(acknowledged by serve\), delivered ([\d,]+) .*, lost ([\d,]+);"
    match = re.search(counts, out, re.M)
    assert match, out
    sent, delivered, lost = (int(group.replace(",", "")) for group in match.groups())
    assert sent >= 3000 and delivered == sent and lost == 0, out
    assert "serve exited 0" in out, out


@pytest.mark.e2e
def test_scale_out_benchmark_prints_both_tiers_and_their_ratio() -> None:
    from tests.support.go_backends import require_go_backends

    require_go_backends()  # built by scripts/test; without them the benchmark only says it skipped
    out = bench("bench_scale_out.py", "--quick")
    assert re.search(r"^one replica: +min +\d+ +median +\d+ spans/s$", out, re.M), out
    assert re.search(r"^3 replicas: +min +\d+ +median +\d+ spans/s$", out, re.M), out
    assert re.search(r"^ratio of the medians \d+\.\d\d \(per round: min \d+\.\d\d, median \d+\.\d\d\)$", out, re.M), out


def test_startup_benchmark_prints_every_command_over_the_baseline() -> None:
    out = bench("bench_startup.py", "--repeat", "7")
    assert re.search(r"^python -c pass \(baseline\): min [\d.]+ ms, median [\d.]+ ms \(56 runs\)$", out, re.M), out
    labels = ["--help", *(f"{name} --help" for name in ("analyze", "export", "diff", "report", "serve"))]
    labels += ["analyze (small trace, text)", "analyze (small trace, json)"]
    for label in labels:
        figures = r" +-?[\d.]+ ms +-?[\d.]+ ms +[\d.]+x +[\d.]+x  <= \d+ ms over: (met|missed)$"
        assert re.search("^" + re.escape(label) + figures, out, re.M), (label, out)
