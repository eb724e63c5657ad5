"""Per category and operation statistics: exact percentiles, means, confidence intervals; throughput."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import (
    category_statistics,
    operation_statistics,
    span_table,
    summary_statistics,
    throughput,
    trace_statistics,
)
from otel_agent_profiler.analytics.statistics import STAT_COLUMNS, group_codes, grouped_summary, z_value
from otel_agent_profiler.core import profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, span

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000
OTHER_TRACE = "b" * 32


def chat(name, parent, start_ms, end_ms, trace_id=TRACE_ID, model="gpt-4o", **usage):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    attributes.update({f"gen_ai.usage.{key}": value for key, value in usage.items()})
    start, end = EPOCH + start_ms * MS, EPOCH + end_ms * MS
    return span(name, parent, start, end, CLIENT, trace_id=trace_id, attributes=attributes)


def tool(name, parent, start_ms, end_ms, tool_name, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name}
    return span(name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def agent(name, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    return span(name, None, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def hand_built_table() -> pd.DataFrame:
    """Tool calls of 300 (search), 150 (weather) and 400 ms (search); LLM calls of 400, 300 and 200 ms."""
    records = [
        agent("root", 0, 1000),
        chat("L1", "root", 0, 400, input_tokens=1200, output_tokens=80),
        tool("T1", "root", 400, 700, "search"),
        tool("T2", "root", 400, 550, "weather"),
        chat("L2", "root", 700, 1000, input_tokens=300, output_tokens=50),
        agent("Broot", 2000, 2700, trace_id=OTHER_TRACE),
        chat("BL", "Broot", 2000, 2200, trace_id=OTHER_TRACE, input_tokens=100, output_tokens=10),
        tool("BT", "Broot", 2200, 2600, "search", trace_id=OTHER_TRACE),
    ]
    return span_table(profile_records(records))


def generated_table(runs: int = 40, seed: int = 7) -> pd.DataFrame:
    spans = [s for run in generate_runs(runs, seed=seed) for s in run]
    return span_table(profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "g").records))


def row(frame: pd.DataFrame, metric: str, **keys: str) -> pd.Series:
    mask = frame["metric"] == metric
    for column, value in keys.items():
        mask &= frame[column] == value
    (index,) = np.flatnonzero(mask.to_numpy())
    return frame.iloc[index]


def test_category_statistics_exact_values() -> None:
    stats = category_statistics(hand_built_table())
    assert list(stats.columns) == ["category", "metric", *STAT_COLUMNS]
    tools = row(stats, "duration_ms", category="tool")
    assert tools["count"] == 3
    assert tools["mean"] == pytest.approx(850 / 3)
    assert tools["std"] == pytest.approx(statistics.stdev([300, 150, 400]))
    assert tools["std"] == pytest.approx(
        math.sqrt(((850 / 3 - 300) ** 2 + (850 / 3 - 150) ** 2 + (850 / 3 - 400) ** 2) / 2)
    )
    # Sorted 150, 300, 400: the p-th percentile sits at p * (n - 1) = 2p, interpolated linearly.
    assert (tools["min"], tools["p50"], tools["max"]) == (150.0, 300.0, 400.0)
    assert tools["p90"] == pytest.approx(380.0)
    assert tools["p95"] == pytest.approx(390.0)
    assert tools["p99"] == pytest.approx(398.0)
    half_width = 1.959963984540054 * tools["std"] / math.sqrt(3)
    assert tools["ci_low"] == pytest.approx(850 / 3 - half_width)
    assert tools["ci_high"] == pytest.approx(850 / 3 + half_width)
    # Tool spans record no tokens: no token rows for them.
    assert set(stats.loc[stats["category"] == "tool", "metric"]) == {"duration_ms", "self_time_ms", "critical_path_ms"}
    llm_tokens = row(stats, "total_tokens", category="llm")
    assert llm_tokens["count"] == 3
    assert llm_tokens["mean"] == pytest.approx((1280 + 350 + 110) / 3)
    assert llm_tokens["p50"] == 350.0
    agents = row(stats, "duration_ms", category="agent")
    assert (agents["count"], agents["mean"], agents["p50"]) == (2, 850.0, 850.0)
    # Rows follow the category order (llm, embedding, tool, agent, ...), then the metric order.
    assert list(dict.fromkeys(stats["category"].astype(str))) == ["llm", "tool", "agent"]
    assert stats["metric"].tolist()[:3] == ["duration_ms", "self_time_ms", "critical_path_ms"]
    assert stats.attrs["confidence"] == 0.95


def test_operation_statistics_exact_values() -> None:
    stats = operation_statistics(hand_built_table(), metrics=["duration_ms", "critical_path_ms"])
    search = row(stats, "duration_ms", category="tool", operation="search")
    assert (search["count"], search["mean"], search["min"], search["max"]) == (2, 350.0, 300.0, 400.0)
    assert search["p90"] == pytest.approx(390.0)
    weather = row(stats, "duration_ms", category="tool", operation="weather")
    assert weather["count"] == 1
    assert weather["p50"] == weather["p99"] == 150.0
    # One value: no standard deviation, no interval.
    assert math.isnan(weather["std"]) and math.isnan(weather["ci_low"]) and math.isnan(weather["ci_high"])
    assert row(stats, "critical_path_ms", category="tool", operation="weather")["mean"] == 0.0
    assert row(stats, "duration_ms", category="llm", operation="gpt-4o")["count"] == 3


@pytest.mark.parametrize(
    ("confidence", "z"), [(0.90, 1.6448536269514722), (0.95, 1.959963984540054), (0.99, 2.5758293035489)]
)
def test_confidence_levels(confidence: float, z: float) -> None:
    assert z_value(confidence) == pytest.approx(z, rel=1e-9)
    stats = category_statistics(hand_built_table(), metrics=["duration_ms"], confidence=confidence)
    tools = row(stats, "duration_ms", category="tool")
    assert tools["ci_high"] - tools["mean"] == pytest.approx(z * statistics.stdev([300, 150, 400]) / math.sqrt(3))
    with pytest.raises(ValueError):
        z_value(1.0)


def test_counted_only_leaves_out_nested_llm_duplicates() -> None:
    records = [
        chat("outer", None, 0, 100),
        chat("inner", "outer", 1, 99, input_tokens=10, output_tokens=5),
    ]
    table = span_table(profile_records(records))
    assert row(category_statistics(table), "duration_ms", category="llm")["count"] == 1
    assert row(category_statistics(table, counted_only=False), "duration_ms", category="llm")["count"] == 2


def test_summary_statistics_by_any_columns_and_category_filter() -> None:
    table = hand_built_table()
    by_trace = summary_statistics(table, by=["trace_id"], metrics=["duration_ms"], categories=["tool"])
    assert by_trace["count"].tolist() == [2, 1]
    assert by_trace["mean"].tolist() == [225.0, 400.0]
    overall = summary_statistics(table, by=[], metrics=["duration_ms"], categories=["llm"])
    assert overall["count"].tolist() == [3]
    assert overall["mean"].tolist() == [300.0]


def test_agrees_with_pandas_and_numpy_on_generated_runs() -> None:
    table = generated_table()
    stats = operation_statistics(table)
    counted = table[table["counted"]]
    for metric in ("duration_ms", "self_time_ms", "total_tokens"):
        grouped = counted.groupby(["category", "operation"], observed=True)[metric]
        for (category, operation), values in grouped:
            values = values.dropna().to_numpy(dtype=float)
            if not len(values):
                continue
            got = row(stats, metric, category=category, operation=operation)
            assert got["count"] == len(values)
            assert got["mean"] == pytest.approx(values.mean(), rel=1e-12)
            if len(values) > 1:
                assert got["std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
            expected = np.percentile(values, [50, 90, 95, 99])
            assert [got["p50"], got["p90"], got["p95"], got["p99"]] == pytest.approx(expected, rel=1e-12)
            assert (got["min"], got["max"]) == (values.min(), values.max())


def test_grouped_summary_against_numpy_with_missing_values() -> None:
    rng = np.random.default_rng(3)
    groups = rng.integers(-1, 6, size=2000)
    values = rng.lognormal(5, 1, size=2000)
    values[rng.random(2000) < 0.1] = np.nan
    summary = grouped_summary(groups, values, 7, [0.5, 0.9, 0.99])
    for g in range(7):
        chosen = values[(groups == g) & ~np.isnan(values)]
        if g == 6:
            assert summary["count"][g] == 0 and np.isnan(summary["mean"][g])
            continue
        assert summary["count"][g] == len(chosen)
        assert summary["mean"][g] == pytest.approx(chosen.mean())
        assert summary["q0.9"][g] == pytest.approx(np.percentile(chosen, 90))
        assert summary["q0.99"][g] == pytest.approx(np.percentile(chosen, 99))


def test_group_codes_keeps_category_order_and_drops_missing_keys() -> None:
    table = hand_built_table()
    ids, keys = group_codes(table, ["category", "model"])
    assert keys["category"].astype(str).tolist() == ["llm"]
    assert keys["model"].astype(str).tolist() == ["gpt-4o"]
    assert (ids[table["model"].isna().to_numpy()] == -1).all()


def test_trace_statistics() -> None:
    stats = trace_statistics(hand_built_table())
    duration = row(stats, "duration_ms")
    assert (duration["count"], duration["mean"], duration["min"], duration["max"]) == (2, 850.0, 700.0, 1000.0)
    assert row(stats, "llm_calls")["mean"] == 1.5
    assert row(stats, "total_tokens")["max"] == 1630.0
    assert "cost_usd" not in set(stats["metric"])  # no prices: no values, no row


def test_throughput_over_the_observed_window() -> None:
    result = throughput(hand_built_table(), operations=True)
    assert list(result.columns) == ["scope", "category", "operation", "count", "window_s", "per_second"]
    by_scope = result.set_index(["scope", result["category"].fillna(""), result["operation"].fillna("")])
    # From the first start (0 ms) to the last end (2700 ms).
    assert (result["window_s"] == 2.7).all()
    assert by_scope.loc[("trace", "", ""), "per_second"] == pytest.approx(2 / 2.7)
    assert by_scope.loc[("span", "", ""), "count"] == 8
    assert by_scope.loc[("category", "tool", ""), "per_second"] == pytest.approx(3 / 2.7)
    assert by_scope.loc[("category", "llm", ""), "count"] == 3
    assert by_scope.loc[("operation", "tool", "search"), "count"] == 2
    assert result.attrs["window_start"] == pd.Timestamp(EPOCH, unit="ns", tz="UTC")
    assert result.attrs["window_end"] == pd.Timestamp(EPOCH + 2700 * MS, unit="ns", tz="UTC")


def test_profiles_are_accepted_directly_and_empty_tables_work() -> None:
    records = [agent("root", 0, 10), tool("T", "root", 1, 5, "x")]
    profiles = profile_records(records)
    pd.testing.assert_frame_equal(category_statistics(profiles), category_statistics(span_table(profiles)))
    empty = category_statistics(span_table([]))
    assert empty.empty and list(empty.columns) == ["category", "metric", *STAT_COLUMNS]
    assert throughput(span_table([]))["per_second"].isna().all()
