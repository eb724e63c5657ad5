"""Call sequences per run, the most frequent ones and frequent n-grams, with durations."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import call_sequences, frequent_ngrams, frequent_sequences, span_table
from otel_agent_profiler.core import profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, span

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000
TRACE_B = "b" * 32
TRACE_C = "c" * 32


def chat(name, parent, start_ms, end_ms, trace_id=TRACE_ID, model="gpt-4o"):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    start, end = EPOCH + start_ms * MS, EPOCH + end_ms * MS
    return span(name, parent, start, end, CLIENT, trace_id=trace_id, attributes=attributes)


def tool(name, parent, start_ms, end_ms, tool_name, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name}
    return span(name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def agent(name, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    return span(name, None, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def hand_built_table() -> pd.DataFrame:
    """A: llm, two tools started together (search before weather by span id), llm.
    B and C: llm then search, taking 700 and 500 ms."""
    records = [
        agent("root", 0, 1000),
        chat("L1", "root", 0, 400),
        tool("T1", "root", 400, 700, "search"),
        tool("T2", "root", 400, 550, "weather"),
        chat("L2", "root", 700, 1000),
        agent("Broot", 2000, 2700, trace_id=TRACE_B),
        chat("BL", "Broot", 2000, 2200, trace_id=TRACE_B),
        tool("BT", "Broot", 2200, 2600, "search", trace_id=TRACE_B),
        agent("Croot", 3000, 3500, trace_id=TRACE_C),
        chat("CL", "Croot", 3000, 3100, trace_id=TRACE_C),
        tool("CT", "Croot", 3100, 3400, "search", trace_id=TRACE_C),
    ]
    return span_table(profile_records(records))


def test_call_sequences_per_trace() -> None:
    sequences = call_sequences(hand_built_table())
    assert list(sequences.columns) == ["trace_id", "sequence", "steps", "duration_ms"]
    assert sequences["trace_id"].tolist() == [TRACE_ID, TRACE_B, TRACE_C]
    assert sequences["sequence"].tolist() == [
        "llm:gpt-4o → tool:search → tool:weather → llm:gpt-4o",
        "llm:gpt-4o → tool:search",
        "llm:gpt-4o → tool:search",
    ]
    assert sequences["steps"].tolist() == [4, 2, 2]
    assert sequences["duration_ms"].tolist() == [1000.0, 700.0, 500.0]
    only_tools = call_sequences(hand_built_table(), categories=["tool"])
    assert only_tools["sequence"].tolist() == ["tool:search → tool:weather", "tool:search", "tool:search"]


def test_frequent_sequences_with_duration_stats() -> None:
    frequent = frequent_sequences(hand_built_table())
    assert frequent["sequence"].tolist() == [
        "llm:gpt-4o → tool:search",
        "llm:gpt-4o → tool:search → tool:weather → llm:gpt-4o",
    ]
    top = frequent.iloc[0]
    assert (top["count"], top["steps"], top["share"]) == (2, 2, pytest.approx(2 / 3))
    assert (top["mean_duration_ms"], top["p50_duration_ms"]) == (600.0, 600.0)
    assert top["p90_duration_ms"] == pytest.approx(680.0)
    assert (top["min_duration_ms"], top["max_duration_ms"]) == (500.0, 700.0)
    assert top["example_trace_id"] == TRACE_B
    assert len(frequent_sequences(hand_built_table(), top=1)) == 1
    assert len(frequent_sequences(hand_built_table(), min_count=2)) == 1


def test_frequent_ngrams_count_occurrences_and_traces() -> None:
    grams = frequent_ngrams(hand_built_table(), n=2)
    assert list(grams.columns) == [
        "n",
        "ngram",
        "count",
        "traces",
        "share_of_traces",
        "mean_duration_ms",
        "p50_duration_ms",
        "p90_duration_ms",
    ]
    first = grams.iloc[0]
    assert (first["ngram"], first["count"], first["traces"]) == ("llm:gpt-4o → tool:search", 3, 3)
    # From the LLM call's start to the tool's end: 700 ms in A, 600 in B, 400 in C.
    assert first["mean_duration_ms"] == pytest.approx(1700 / 3)
    assert first["p50_duration_ms"] == 600.0
    assert set(grams["ngram"][1:]) == {"tool:search → tool:weather", "tool:weather → llm:gpt-4o"}
    assert (grams["count"][1:] == 1).all()
    # tool:weather → llm:gpt-4o runs from 400 (weather's start) to 1000 ms.
    weather_llm = grams[grams["ngram"] == "tool:weather → llm:gpt-4o"].iloc[0]
    assert weather_llm["mean_duration_ms"] == 600.0
    both = frequent_ngrams(hand_built_table(), n=[1, 3])
    assert set(both["n"]) == {1, 3}
    assert both.iloc[0]["ngram"] == "llm:gpt-4o" and both.iloc[0]["count"] == 4
    assert frequent_ngrams(hand_built_table(), n=5).empty
    with pytest.raises(ValueError):
        frequent_ngrams(hand_built_table(), n=0)


def test_collapse_repeats() -> None:
    records = [agent("root", 0, 1000)]
    records += [chat(f"L{i}", "root", 100 * i, 100 * i + 90, model="gpt-4o-mini") for i in range(3)]
    records += [tool("T", "root", 300, 400, "search"), chat("L9", "root", 400, 500)]
    table = span_table(profile_records(records))
    assert call_sequences(table)["sequence"].tolist() == [
        "llm:gpt-4o-mini → llm:gpt-4o-mini → llm:gpt-4o-mini → tool:search → llm:gpt-4o"
    ]
    collapsed = call_sequences(table, collapse_repeats=True)
    assert collapsed["sequence"].tolist() == ["llm:gpt-4o-mini×3 → tool:search → llm:gpt-4o"]  # noqa: RUF001
    assert collapsed["steps"].tolist() == [3]
    grams = frequent_ngrams(table, n=2, collapse_repeats=True)
    first = grams[grams["ngram"] == "llm:gpt-4o-mini×3 → tool:search"].iloc[0]  # noqa: RUF001
    assert first["mean_duration_ms"] == 400.0


def test_generated_runs() -> None:
    spans = [s for run in generate_runs(40, seed=9) for s in run]
    table = span_table(profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "g").records))
    sequences = call_sequences(table)
    calls = table[table["category"].isin(["llm", "tool"]) & table["counted"]]
    assert sequences["steps"].sum() == len(calls)
    assert len(sequences) == 40
    assert all(step.split(":")[0] in ("llm", "tool") for seq in sequences["sequence"] for step in seq.split(" → "))
    grams = frequent_ngrams(table, n=3, top=10)
    assert len(grams) == 10
    assert grams["count"].is_monotonic_decreasing
    assert (grams["traces"] <= grams["count"]).all()
    assert (grams["mean_duration_ms"] > 0).all()
    frequent = frequent_sequences(table, categories=["llm"], collapse_repeats=True)
    assert frequent["count"].sum() == 40
    assert frequent["share"].sum() == pytest.approx(1.0)


def test_empty_table() -> None:
    assert call_sequences(span_table([])).empty
    assert frequent_sequences(span_table([])).empty
    assert frequent_ngrams(span_table([]), n=2).empty


@pytest.mark.parametrize("n_labels", [1, 7, 3_000_000])
def test_ngram_windows_are_counted_as_numpy_counts_rows(n_labels: int) -> None:
    """One integer per window (or rows sorted as records, when that integer would not fit in 63
    bits: 3,000,000 labels cubed) groups and orders the windows as ``np.unique(axis=0)`` does."""
    import numpy as np

    from otel_agent_profiler.analytics.sequences import _unique_rows

    generator = np.random.default_rng(7)
    codes = generator.integers(0, min(n_labels, 5), size=400) * max(n_labels // 5, 1)
    windows = np.lib.stride_tricks.sliding_window_view(codes.astype(np.int64), 3)
    expected_grams, expected_inverse, expected_counts = np.unique(
        windows, axis=0, return_inverse=True, return_counts=True
    )
    grams, inverse, counts = _unique_rows(windows, n_labels)
    assert grams.tolist() == expected_grams.tolist()
    assert inverse.tolist() == expected_inverse.reshape(-1).tolist()
    assert counts.tolist() == expected_counts.tolist()
    assert len(grams) > (1 if n_labels > 1 else 0)
