"""Concurrency of LLM and tool calls: exact time-weighted distributions and spikes with their calls."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import concurrency_distribution, concurrency_spikes, span_table
from otel_agent_profiler.core import profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, sid, span

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000
OTHER_TRACE = "b" * 32


def chat(name, parent, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    start, end = EPOCH + start_ms * MS, EPOCH + end_ms * MS
    return span(name, parent, start, end, CLIENT, trace_id=trace_id, attributes=attributes)


def tool(name, parent, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return span(name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def agent(name, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "invoke_agent"}
    return span(name, None, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def hand_built_table() -> pd.DataFrame:
    """Trace A (0-1000 ms): L1 0-400, T1 400-700 and T2 400-550 in parallel, L2 700-1000.
    Trace B (2000-2700 ms): BL 2000-2200, BT 2200-2600, then 100 ms of nothing."""
    records = [
        agent("root", 0, 1000),
        chat("L1", "root", 0, 400),
        tool("T1", "root", 400, 700),
        tool("T2", "root", 400, 550),
        chat("L2", "root", 700, 1000),
        agent("Broot", 2000, 2700, trace_id=OTHER_TRACE),
        chat("BL", "Broot", 2000, 2200, trace_id=OTHER_TRACE),
        tool("BT", "Broot", 2200, 2600, trace_id=OTHER_TRACE),
    ]
    return span_table(profile_records(records))


def levels(frame: pd.DataFrame, scope: str, trace_id: str | None = None, calls: str = "llm+tool") -> dict:
    mask = (frame["scope"] == scope) & (frame["calls"] == calls)
    mask &= frame["trace_id"].isna() if trace_id is None else frame["trace_id"] == trace_id
    chosen = frame[mask.to_numpy(dtype=bool)]
    return {
        int(level): (time, fraction) for level, time, fraction in chosen[["level", "time_ms", "fraction"]].to_numpy()
    }


def test_per_trace_distribution_is_exact() -> None:
    dist = concurrency_distribution(hand_built_table())
    assert list(dist.columns) == ["scope", "trace_id", "calls", "level", "time_ms", "fraction"]
    # Half-open intervals: L1 ends as T1 and T2 start, so only T1 and T2 overlap (400-550 ms).
    assert levels(dist, "trace", TRACE_ID) == {0: (0.0, 0.0), 1: (850.0, 0.85), 2: (150.0, 0.15)}
    assert levels(dist, "trace", OTHER_TRACE) == {
        0: (100.0, pytest.approx(1 / 7)),
        1: (600.0, pytest.approx(6 / 7)),
    }


def test_overall_distribution_covers_the_observed_window() -> None:
    dist = concurrency_distribution(hand_built_table(), scopes=["overall"])
    assert set(dist["scope"]) == {"overall"}
    # 0-2700 ms: busy 1000 ms in A and 600 ms in B, idle for the other 1100.
    assert levels(dist, "overall") == {
        0: (1100.0, pytest.approx(11 / 27)),
        1: (1450.0, pytest.approx(14.5 / 27)),
        2: (150.0, pytest.approx(1.5 / 27)),
    }


def test_by_category_counts_each_category_apart() -> None:
    dist = concurrency_distribution(hand_built_table(), scopes=["overall", "trace"], by_category=True)
    assert levels(dist, "overall", calls="llm") == {
        0: (1800.0, pytest.approx(18 / 27)),
        1: (900.0, pytest.approx(9 / 27)),
    }
    assert levels(dist, "trace", TRACE_ID, calls="tool") == {0: (700.0, 0.7), 1: (150.0, 0.15), 2: (150.0, 0.15)}
    assert levels(dist, "trace", OTHER_TRACE, calls="tool") == {
        0: (300.0, pytest.approx(3 / 7)),
        1: (400.0, pytest.approx(4 / 7)),
    }


def test_spikes_list_the_calls_involved() -> None:
    spikes = concurrency_spikes(hand_built_table(), threshold=1)
    assert len(spikes) == 1
    spike = spikes.iloc[0]
    assert spike["start"] == pd.Timestamp(EPOCH + 400 * MS, unit="ns", tz="UTC")
    assert spike["end"] == pd.Timestamp(EPOCH + 550 * MS, unit="ns", tz="UTC")
    assert spike["duration_ms"] == 150.0
    assert (spike["peak"], spike["call_count"]) == (2, 2)
    assert spike["span_ids"] == (sid("T1"), sid("T2"))
    assert spike["names"] == ("T1", "T2")
    assert spike["trace_ids"] == (TRACE_ID, TRACE_ID)
    assert pd.isna(spike["trace_id"]) and spike["scope"] == "overall"
    assert concurrency_spikes(hand_built_table(), threshold=2).empty


def test_calls_of_different_traces_overlap_overall_only() -> None:
    records = [
        chat("A", None, 0, 100),
        chat("B", None, 50, 150, trace_id=OTHER_TRACE),
        chat("C", None, 60, 80, trace_id=OTHER_TRACE),
    ]
    table = span_table(profile_records(records))
    dist = concurrency_distribution(table)
    assert levels(dist, "overall") == {
        0: (0.0, 0.0),
        1: (100.0, pytest.approx(100 / 150)),  # 0-50 (A) and 100-150 (B)
        2: (30.0, pytest.approx(30 / 150)),  # 50-60 and 80-100
        3: (20.0, pytest.approx(20 / 150)),  # 60-80
    }
    assert levels(dist, "trace", TRACE_ID) == {0: (0.0, 0.0), 1: (100.0, 1.0)}
    assert levels(dist, "trace", OTHER_TRACE) == {0: (0.0, 0.0), 1: (80.0, 0.8), 2: (20.0, 0.2)}

    overall = concurrency_spikes(table, threshold=1)
    assert len(overall) == 1
    spike = overall.iloc[0]
    assert (spike["duration_ms"], spike["peak"]) == (50.0, 3)
    assert spike["names"] == ("A", "B", "C")
    assert spike["trace_ids"] == (TRACE_ID, OTHER_TRACE, OTHER_TRACE)

    per_trace = concurrency_spikes(table, threshold=1, scope="trace")
    assert len(per_trace) == 1
    assert per_trace.iloc[0]["trace_id"] == OTHER_TRACE
    assert per_trace.iloc[0]["names"] == ("B", "C")
    assert per_trace.iloc[0]["duration_ms"] == 20.0


def test_zero_length_calls_and_other_categories_are_left_out() -> None:
    records = [agent("root", 0, 100), chat("L", "root", 10, 10), tool("T", "root", 20, 60)]
    dist = concurrency_distribution(span_table(profile_records(records)), scopes=["trace"])
    assert levels(dist, "trace", TRACE_ID) == {0: (60.0, 0.6), 1: (40.0, 0.4)}


def test_generated_runs_time_weighted_mean_equals_busy_time() -> None:
    spans = [s for run in generate_runs(30, seed=5) for s in run]
    table = span_table(profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "g").records))
    dist = concurrency_distribution(table)
    calls = table[table["category"].isin(["llm", "tool"]) & table["counted"]]
    sums = dist.groupby([dist["scope"], dist["trace_id"].fillna("")])["fraction"].sum()
    assert np.allclose(sums.to_numpy(), 1.0)
    overall = dist[dist["scope"] == "overall"]
    # Level times weighted by level add up to the calls' total duration.
    assert (overall["level"] * overall["time_ms"]).sum() == pytest.approx(calls["duration_ms"].sum(), rel=1e-9)
    first_trace = table["trace_id"].iloc[0]
    one = dist[dist["trace_id"] == first_trace]
    busy = calls.loc[calls["trace_id"] == first_trace, "duration_ms"].sum()
    assert (one["level"] * one["time_ms"]).sum() == pytest.approx(busy, rel=1e-9)

    spikes = concurrency_spikes(table, threshold=3, scope="trace")
    assert len(spikes) > 0
    assert (spikes["peak"] > 3).all()
    assert (spikes["call_count"] >= spikes["peak"]).all()
    assert (spikes["duration_ms"] > 0).all()
    assert all(len(set(ids)) == 1 for ids in spikes["trace_ids"])
    assert all(len(ids) == n for ids, n in zip(spikes["span_ids"], spikes["call_count"], strict=True))


def test_empty_and_invalid_input() -> None:
    empty = span_table([])
    assert concurrency_distribution(empty, scopes=["trace"]).empty
    assert concurrency_spikes(empty, threshold=1).empty
    with pytest.raises(ValueError):
        concurrency_spikes(hand_built_table(), threshold=-1)
    with pytest.raises(ValueError):
        concurrency_distribution(hand_built_table(), scopes=["everything"])  # type: ignore[list-item]
