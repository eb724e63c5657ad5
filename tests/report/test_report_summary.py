"""The summary JSON's cross-run parts: throughput, bounded concurrency spikes, forecasts, prompt-prefix candidates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import (
    concurrency_distribution,
    concurrency_spikes,
    fit_forecaster,
    prefix_cache_candidates,
    span_table,
)
from otel_agent_profiler.cli import main
from otel_agent_profiler.core import profile_records
from otel_agent_profiler.core.findings import find_all
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.report.html import by_duration
from otel_agent_profiler.report.summary import (
    MAX_SPIKE_CALLS,
    MAX_SPIKES,
    build_summary,
    cross_run_statistics,
    default_spike_threshold,
    table_statistics,
)

SYSTEM = "You are a meticulous research assistant who cites every source. " * 80  # ~5,000 characters


def _document(run_count: int, seed: int = 3, shared_prompt: bool = False) -> dict[str, Any]:
    spans = [span for run in generate_runs(run_count, seed=seed) for span in run]
    if shared_prompt:
        for number, span in enumerate(spans):
            if span["name"].startswith("chat "):
                messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"question {number}"}]
                span["attributes"].append(
                    {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}}
                )
    return otlp_document(spans)


def _profiles(document: dict[str, Any]) -> list[TraceProfile]:
    trace_file = parse_trace_bytes(json.dumps(document).encode(), "runs.json")
    assert trace_file.ok, trace_file.problems
    return profile_records(trace_file.records)


@pytest.fixture(scope="module")
def runs() -> list[TraceProfile]:
    return _profiles(_document(40))


@pytest.fixture(scope="module")
def statistics(runs: list[TraceProfile]) -> dict[str, Any]:
    result = cross_run_statistics(runs)
    assert result is not None
    # What the command writes: plain JSON, no NaN.
    loaded: dict[str, Any] = json.loads(json.dumps(result, allow_nan=False))
    return loaded


def test_throughput_counts_traces_spans_and_calls_over_the_observed_window(
    runs: list[TraceProfile], statistics: dict[str, Any]
) -> None:
    throughput = statistics["throughput"]
    first = min(p.start_ns for p in runs)
    last = max(p.end_ns for p in runs)
    assert pd.Timestamp(throughput["window_start"]).value == first
    assert pd.Timestamp(throughput["window_end"]).value == last
    rows = {(r["scope"], r["category"], r["operation"]): r for r in throughput["rows"]}
    window_s = (last - first) / 1e9
    assert rows[("trace", None, None)]["count"] == len(runs)
    assert rows[("trace", None, None)]["per_second"] == pytest.approx(len(runs) / window_s)
    assert rows[("span", None, None)]["count"] == sum(p.span_count for p in runs)
    llm_calls = sum(p.llm_calls for p in runs)
    assert rows[("category", "llm", None)]["count"] == llm_calls
    per_model = sum(
        r["count"] for (scope, category, _), r in rows.items() if scope == "operation" and category == "llm"
    )
    assert per_model == llm_calls


def test_default_spike_threshold_is_the_level_exceeded_less_than_5_percent_of_busy_time(
    runs: list[TraceProfile], statistics: dict[str, Any]
) -> None:
    distribution = concurrency_distribution(span_table(runs), scopes=("overall",))
    busy = distribution[distribution["level"] > 0]
    threshold = statistics["concurrency_spikes"]["threshold"]
    assert statistics["concurrency_spikes"]["threshold_source"] == "p95"
    assert threshold == default_spike_threshold(distribution) >= 1
    share_above = busy[busy["level"] > threshold]["time_ms"].sum() / busy["time_ms"].sum()
    share_above_lower = busy[busy["level"] > threshold - 1]["time_ms"].sum() / busy["time_ms"].sum()
    assert share_above <= 0.05 < share_above_lower


def test_spikes_are_counted_in_full_and_listed_within_bounds(
    runs: list[TraceProfile], statistics: dict[str, Any]
) -> None:
    spikes = statistics["concurrency_spikes"]
    threshold = spikes["threshold"]
    table = span_table(runs)
    spans_by_id = {(p.trace_id, s.span_id): s for p in runs for s in p.spans}
    for scope in ("overall", "trace"):
        full = concurrency_spikes(table, threshold, scope=scope)
        summary = spikes[scope]
        assert summary["count"] == len(full)
        assert summary["total_ms"] == pytest.approx(full["duration_ms"].sum())
        assert len(summary["spikes"]) == min(len(full), MAX_SPIKES)
        assert summary["truncated"] == (len(full) > MAX_SPIKES)
        if not len(full):
            continue
        assert summary["max_peak"] == full["peak"].max()
        peaks = [s["peak"] for s in summary["spikes"]]
        assert peaks == sorted(peaks, reverse=True) and peaks[0] == full["peak"].max()
        for spike in summary["spikes"]:
            assert spike["peak"] > threshold
            assert len(spike["involved"]) == min(spike["call_count"], MAX_SPIKE_CALLS)
            assert spike["calls_truncated"] == (spike["call_count"] > MAX_SPIKE_CALLS)
            start, end = pd.Timestamp(spike["start"]).value, pd.Timestamp(spike["end"]).value
            for call in spike["involved"]:
                span = spans_by_id[(call["trace_id"], call["span_id"])]
                assert span.record.name == call["name"]
                assert span.start_ns < end and span.end_ns > start  # it overlaps the spike
                if scope == "trace":
                    assert call["trace_id"] == spike["trace_id"]
    # The synthetic runs overlap in time, so there are spikes across runs to report.
    assert spikes["overall"]["count"] > 0


def test_spike_threshold_option_is_used_and_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "runs.json"
    source.write_text(json.dumps(_document(8)), encoding="utf-8")
    summary_path = tmp_path / "summary.json"
    args = ["report", str(source), "--html", str(tmp_path / "r.html"), "--summary-json", str(summary_path)]
    assert main([*args, "--spike-threshold", "1", "--no-progress"]) == 0
    spikes = json.loads(summary_path.read_text())["statistics"]["concurrency_spikes"]
    assert spikes["threshold"] == 1 and spikes["threshold_source"] == "option"
    assert all(s["peak"] > 1 for scope in ("overall", "trace") for s in spikes[scope]["spikes"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--spike-threshold", "-1"])
    assert exit_info.value.code == 2
    assert "expected 0 or more, got -1" in capsys.readouterr().err


def test_forecasts_report_their_error_against_the_mean(runs: list[TraceProfile], statistics: dict[str, Any]) -> None:
    forecasts = statistics["forecasts"]
    expected = fit_forecaster(span_table(runs))
    assert forecasts["features"] == list(expected.features)
    evaluation = {row["target"]: row for row in forecasts["evaluation"]}
    for row in expected.evaluation.itertuples():
        got = evaluation[row.target]
        assert got["model_mae"] == pytest.approx(row.model_mae)
        assert got["mean_mae"] == pytest.approx(row.mean_mae)
        assert got["used"] == row.used
        # The linear model is kept only when it beats the mean.
        assert (got["used"] == "linear") == (row.target in forecasts["coefficients"])
        if got["used"] == "linear":
            assert got["model_mae"] < got["mean_mae"]
        assert forecasts["means"][row.target] == pytest.approx(expected.means[row.target])


def test_summary_embeds_spans_only_for_the_detail_traces(runs: list[TraceProfile]) -> None:
    findings = {p.trace_id: find_all(p) for p in runs}
    slowest = by_duration(runs)[0]
    summary = build_summary(runs, findings, detail_trace_ids={slowest.trace_id})
    with_spans = [t["trace_id"] for t in summary["traces"] if "spans" in t]
    assert with_spans == [slowest.trace_id]
    # Every trace still has its totals and findings.
    for trace in summary["traces"]:
        assert trace["span_count"] > 0 and trace["categories"]
        assert len(trace["findings"]) == len(findings[trace["trace_id"]])


def test_prefix_cache_candidates_only_when_asked(tmp_path: Path) -> None:
    source = tmp_path / "runs.json"
    document = _document(3, shared_prompt=True)
    source.write_text(json.dumps(document), encoding="utf-8")
    summary_path = tmp_path / "summary.json"
    args = ["report", str(source), "--html", str(tmp_path / "r.html"), "--summary-json", str(summary_path)]
    assert main([*args, "--no-progress"]) == 0
    assert json.loads(summary_path.read_text())["prefix_cache_candidates"] is None
    assert main([*args, "--no-progress", "--prefix-cache"]) == 0
    candidates = json.loads(summary_path.read_text())["prefix_cache_candidates"]
    expected = prefix_cache_candidates(_profiles(document))
    assert expected, "the shared system prompt should make candidates"
    assert candidates == [c.to_dict() for c in expected]
    llm_calls = sum(1 for s in document["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"].startswith("chat "))
    assert sum(c["calls"] for c in candidates) == llm_calls
    assert all(c["preview"].startswith('[{"role": "system"') for c in candidates)


@pytest.mark.parametrize("charts_only", [True, False])
def test_statistics_from_the_columns_they_read_equal_those_of_the_whole_table(
    runs: list[TraceProfile], charts_only: bool
) -> None:
    from otel_agent_profiler.analytics import span_table

    # A span that never ended and a split-out call (not counted) among them: columns read only
    # for such spans are needed too.
    unended = _profiles(_document(3, seed=11))
    for profile in unended[:1]:
        profile.spans[-1].ended = False
    profiles = [*runs, *unended]
    for threshold in (None, 2):
        narrow = cross_run_statistics(profiles, spike_threshold=threshold, charts_only=charts_only)
        whole = table_statistics(span_table(profiles), spike_threshold=threshold, charts_only=charts_only)
        assert json.dumps(narrow, sort_keys=True, default=str) == json.dumps(whole, sort_keys=True, default=str)
