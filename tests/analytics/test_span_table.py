"""The span table: one row per span, documented columns and dtypes, exact values; files in and out."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import SPAN_COLUMNS, read_table, span_table, to_dataframe, trace_table, write_table
from otel_agent_profiler.core import CATEGORIES, ModelPrice, PriceTable, SpanRecord, StatusCode, profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, sid, span, with_events

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000
OTHER_TRACE = "b" * 32
HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None
# The module, not the function of the same name that the package exports.
span_table_module = importlib.import_module("otel_agent_profiler.analytics.span_table")


def chat(name, parent, start_ms, end_ms, model="gpt-4o", trace_id=TRACE_ID, **usage):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    attributes.update({f"gen_ai.usage.{key}": value for key, value in usage.items()})
    return span(
        name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, CLIENT, trace_id=trace_id, attributes=attributes
    )


def tool(name, parent, start_ms, end_ms, tool_name, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name}
    return span(name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def agent(name, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    return span(name, None, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def with_service(record: SpanRecord, service: str) -> SpanRecord:
    return dataclasses.replace(record, resource={"service.name": service})


def hand_built() -> list[SpanRecord]:
    """Trace A: an agent, a streaming LLM call, two tools in parallel, an LLM call. Trace B: shorter."""
    streaming = with_events(
        chat("L1", "root", 0, 400, input_tokens=1200, output_tokens=80, **{"cache_read.input_tokens": 200}),
        ("gen_ai.content.completion.chunk", EPOCH + 100 * MS),
    )
    a = [
        agent("root", 0, 1000),
        streaming,
        tool("T1", "root", 400, 700, "search"),
        tool("T2", "root", 400, 550, "weather"),
        chat("L2", "root", 700, 1000, input_tokens=300, output_tokens=50),
    ]
    a = [with_service(record, "agent-a") for record in a]
    b = [
        agent("Broot", 2000, 2700, trace_id=OTHER_TRACE),
        chat("BL", "Broot", 2000, 2200, trace_id=OTHER_TRACE, input_tokens=100, output_tokens=10),
        dataclasses.replace(tool("BT", "Broot", 2200, 2600, "search", trace_id=OTHER_TRACE), status=StatusCode.ERROR),
    ]
    return a + b


def generated_profiles(runs: int, seed: int = 7):
    spans = [s for run in generate_runs(runs, seed=seed) for s in run]
    return profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "generated").records)


def test_columns_and_dtypes_are_the_documented_ones() -> None:
    table = span_table(profile_records(hand_built()))
    assert list(table.columns) == list(SPAN_COLUMNS)
    for column, dtype in SPAN_COLUMNS.items():
        assert str(table[column].dtype) == dtype or (dtype == "string" and table[column].dtype == pd.StringDtype()), (
            column,
            table[column].dtype,
        )
    assert list(table["category"].cat.categories) == list(CATEGORIES)
    assert list(table["kind"].cat.categories) == ["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
    assert list(table["status"].cat.categories) == ["UNSET", "OK", "ERROR"]


def test_values_of_a_hand_built_trace_are_exact() -> None:
    table = span_table(profile_records(hand_built()))
    a = table[table["trace_id"] == TRACE_ID].set_index("span_id")
    # Depth-first order: root, then children by start time, then span id.
    assert list(table["span_id"][:5]) == [sid("root"), sid("L1"), sid("T1"), sid("T2"), sid("L2")]
    assert list(a["name"]) == ["root", "L1", "T1", "T2", "L2"]
    assert list(a["depth"]) == [0, 1, 1, 1, 1]
    assert a["parent_span_id"].isna().tolist() == [True, False, False, False, False]
    assert set(a["parent_span_id"].dropna()) == {sid("root")}
    assert set(a["root_span_id"]) == {sid("root")}
    assert list(a["category"]) == ["agent", "llm", "tool", "tool", "llm"]
    assert list(a["operation"]) == ["planner", "gpt-4o", "search", "weather", "gpt-4o"]
    assert a["model"].isna().tolist() == [True, False, True, True, False]
    assert list(a["kind"]) == ["INTERNAL", "CLIENT", "INTERNAL", "INTERNAL", "CLIENT"]
    assert set(a["service"]) == {"agent-a"}
    assert list(a["start_offset_ms"]) == [0.0, 0.0, 400.0, 400.0, 700.0]
    assert list(a["duration_ms"]) == [1000.0, 400.0, 300.0, 150.0, 300.0]
    assert list(a["self_time_ms"]) == [0.0, 400.0, 300.0, 150.0, 300.0]
    assert list(a["critical_path_ms"]) == [0.0, 400.0, 300.0, 0.0, 300.0]
    assert list(a["on_critical_path"]) == [True, True, True, False, True]
    assert a["counted"].all() and a["ended"].all()
    assert list(a["streaming"]) == [False, True, False, False, False]
    assert a.loc[sid("L1"), "start"] == pd.Timestamp(EPOCH, unit="ns", tz="UTC")
    assert a.loc[sid("L2"), "start"] == pd.Timestamp(EPOCH + 700 * MS, unit="ns", tz="UTC")
    l1 = a.loc[sid("L1")]
    assert (l1["input_tokens"], l1["output_tokens"], l1["cached_input_tokens"], l1["reasoning_tokens"]) == (
        1200,
        80,
        200,
        0,
    )
    assert l1["total_tokens"] == 1280
    assert l1["time_to_first_token_ms"] == 100.0
    assert a["input_tokens"].isna().tolist() == [True, False, True, True, False]
    assert a["time_to_first_token_ms"].isna().tolist() == [True, False, True, True, True]
    assert a["cost_usd"].isna().all()

    b = table[table["trace_id"] == OTHER_TRACE].set_index("span_id")
    assert list(b["start_offset_ms"]) == [0.0, 0.0, 200.0]
    assert b.loc[sid("BT"), "status"] == "ERROR"
    assert b["service"].isna().all()


def test_costs_with_a_price_table() -> None:
    prices = PriceTable({"gpt-4o": ModelPrice(input=2.5, output=10.0, cached_input=1.25)})
    table = span_table(profile_records(hand_built(), prices=prices))
    costs = table.set_index("span_id")["cost_usd"]
    # 1000 uncached input tokens at 2.5, 200 cached at 1.25, 80 output at 10 (USD per million).
    assert costs[sid("L1")] == pytest.approx((1000 * 2.5 + 200 * 1.25 + 80 * 10.0) / 1e6)
    assert pd.isna(costs[sid("T1")])


def test_several_roots_and_missing_parents() -> None:
    records = [
        span("r1", None, EPOCH, EPOCH + 10 * MS),
        span("c1", "r1", EPOCH, EPOCH + 5 * MS),
        span("orphan", "lost", EPOCH + 20 * MS, EPOCH + 30 * MS),
        span("c2", "orphan", EPOCH + 21 * MS, EPOCH + 22 * MS),
    ]
    table = span_table(profile_records(records)).set_index("name")
    assert table.loc["orphan", "depth"] == 0
    assert table.loc["orphan", "parent_span_id"] == sid("lost")  # the recorded parent, missing from the data
    assert table.loc["c2", "root_span_id"] == sid("orphan")
    assert table.loc["c1", "root_span_id"] == sid("r1")
    assert table.loc["r1", "root_span_id"] == sid("r1")


def test_released_profiles_give_the_same_table() -> None:
    profiles = profile_records(hand_built())
    before = span_table(profiles)
    for profile in profiles:
        profile.release()
    pd.testing.assert_frame_equal(span_table(profiles), before)


def test_nested_llm_duplicate_is_not_counted() -> None:
    records = [
        chat("outer", None, 0, 100, model="gpt-4o"),
        chat("inner", "outer", 1, 99, model="gpt-4o", input_tokens=10, output_tokens=5),
    ]
    table = span_table(profile_records(records)).set_index("name")
    assert not table.loc["outer", "counted"]
    assert table.loc["inner", "counted"]


def test_empty_input_gives_an_empty_table_with_the_dtypes() -> None:
    table = span_table([])
    assert len(table) == 0
    assert list(table.columns) == list(SPAN_COLUMNS)
    assert str(table["start"].dtype) == "datetime64[ns, UTC]"
    assert str(table["input_tokens"].dtype) == "Int64"
    assert len(trace_table(table)) == 0


def test_trace_table_sums_counted_spans() -> None:
    traces = trace_table(profile_records(hand_built())).set_index("trace_id")
    assert list(traces.index) == [TRACE_ID, OTHER_TRACE]
    a = traces.loc[TRACE_ID]
    assert a["duration_ms"] == 1000.0
    assert a["critical_path_ms"] == 1000.0
    assert a["span_count"] == 5
    assert (a["llm_calls"], a["tool_calls"], a["agent_calls"], a["memory_calls"]) == (2, 2, 1, 0)
    assert (a["input_tokens"], a["output_tokens"], a["cached_input_tokens"], a["total_tokens"]) == (
        1500,
        130,
        200,
        1630,
    )
    assert pd.isna(a["cost_usd"])
    assert a["start"] == pd.Timestamp(EPOCH, unit="ns", tz="UTC")
    assert traces.loc[OTHER_TRACE, "duration_ms"] == 700.0
    assert traces.loc[OTHER_TRACE, "total_tokens"] == 110


def test_trace_table_matches_the_profiles_on_generated_runs() -> None:
    profiles = generated_profiles(30)
    traces = trace_table(profiles)
    assert list(traces["trace_id"]) == [p.trace_id for p in profiles]
    assert traces["duration_ms"].tolist() == [p.duration_ns / 1e6 for p in profiles]
    assert traces["llm_calls"].tolist() == [p.llm_calls for p in profiles]
    assert traces["input_tokens"].tolist() == [p.tokens.input for p in profiles]
    assert traces["span_count"].tolist() == [p.span_count for p in profiles]
    assert traces["critical_path_ms"].to_numpy() == pytest.approx([p.critical_path_ns / 1e6 for p in profiles])


def test_generated_runs_agree_with_the_profiles_span_by_span() -> None:
    profiles = generated_profiles(20)
    table = span_table(profiles)
    spans = [s for p in profiles for s in p.spans]
    assert len(table) == len(spans)
    assert table["span_id"].tolist() == [s.span_id for s in spans]
    assert table["self_time_ms"].tolist() == [s.self_time_ns / 1e6 for s in spans]
    assert table["category"].astype(str).tolist() == [s.category for s in spans]
    tokens = table["input_tokens"].tolist()
    assert tokens == [s.tokens.input if s.tokens is not None else pd.NA for s in spans]
    assert set(table["service"].dropna()) == {"research-agent"}


def test_to_dataframe_reads_files_and_profiles(tmp_path: Path) -> None:
    runs = generate_runs(6, seed=11)
    first = tmp_path / "first.json"
    second = tmp_path / "second.json"
    first.write_text(json.dumps(otlp_document([s for run in runs[:3] for s in run])))
    second.write_text(json.dumps(otlp_document([s for run in runs[3:] for s in run])))
    table = to_dataframe([first, str(second)])
    expected = span_table(generated_profiles_from(runs))
    pd.testing.assert_frame_equal(table, expected)
    # A single path and a single profile work too.
    assert to_dataframe(first)["trace_id"].nunique() == 3
    assert len(to_dataframe(generated_profiles_from(runs[:1])[0])) == len(runs[0])


def generated_profiles_from(runs):
    spans = [s for run in runs for s in run]
    return profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "generated").records)


def test_to_dataframe_raises_on_unreadable_files_unless_told_to_skip(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(otlp_document(generate_runs(1)[0])))
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [')
    with pytest.raises(ValueError, match=r"bad\.json"):
        to_dataframe([good, bad])
    assert to_dataframe([good, bad], on_problem="skip")["trace_id"].nunique() == 1
    with pytest.raises(TypeError):
        to_dataframe([42])  # type: ignore[list-item]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_csv_round_trip_keeps_values_and_dtypes(tmp_path: Path, suffix: str) -> None:
    table = span_table(generated_profiles(10) + profile_records(hand_built()))
    path = write_table(table, tmp_path / f"spans{suffix}")
    pd.testing.assert_frame_equal(read_table(path), table, check_exact=True)
    traces = trace_table(table)
    pd.testing.assert_frame_equal(read_table(write_table(traces, tmp_path / f"traces{suffix}")), traces)


@pytest.mark.skipif(not HAS_PYARROW, reason="pyarrow is not installed (the [parquet] extra)")
def test_parquet_round_trip_keeps_values_and_dtypes(tmp_path: Path) -> None:
    table = span_table(generated_profiles(10) + profile_records(hand_built()))
    path = write_table(table, tmp_path / "spans.parquet")
    pd.testing.assert_frame_equal(read_table(path), table, check_exact=True)
    traces = trace_table(table)
    pd.testing.assert_frame_equal(read_table(write_table(traces, tmp_path / "traces.pq")), traces)


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_table_module, "_pyarrow_installed", lambda: False)
    table = span_table(profile_records(hand_built()))
    with pytest.raises(ImportError, match=r"pip install 'otel-agent-profiler\[parquet\]'"):
        write_table(table, tmp_path / "spans.parquet")
    assert not (tmp_path / "spans.parquet").exists()


def test_unknown_table_format_is_refused(tmp_path: Path) -> None:
    table = span_table(profile_records(hand_built()))
    with pytest.raises(ValueError, match=r"\.xlsx"):
        write_table(table, tmp_path / "spans.xlsx")
    with pytest.raises(ValueError, match="no suffix"):
        read_table(tmp_path / "spans")


def test_numbers_are_numpy_backed_for_speed() -> None:
    table = span_table(generated_profiles(5))
    for column in ("depth", "duration_ms", "self_time_ms", "critical_path_ms", "start_offset_ms"):
        assert isinstance(table[column].to_numpy(), np.ndarray)
        assert table[column].dtype.kind in "if"


def test_chosen_columns_are_those_of_the_whole_table_in_its_order() -> None:
    profiles = generated_profiles(12) + profile_records(hand_built())
    whole = span_table(profiles)
    for column in SPAN_COLUMNS:  # each alone: what it reads is computed without the others
        pd.testing.assert_frame_equal(span_table(profiles, columns=[column]), whole[[column]], check_exact=True)
    chosen = ["total_tokens", "trace_id", "root_span_id", "input_tokens", "start_offset_ms", "service"]
    table = span_table(profiles, columns=chosen)
    assert list(table.columns) == [
        "trace_id",
        "root_span_id",
        "service",
        "start_offset_ms",
        "input_tokens",
        "total_tokens",
    ]
    pd.testing.assert_frame_equal(table, whole[list(table.columns)], check_exact=True)
    pd.testing.assert_frame_equal(span_table(profiles, columns="service"), whole[["service"]], check_exact=True)


def test_chosen_columns_of_no_spans_keep_their_dtypes() -> None:
    table = span_table([], columns=("start", "input_tokens"))
    assert list(table.columns) == ["start", "input_tokens"] and len(table) == 0
    assert [str(dtype) for dtype in table.dtypes] == ["datetime64[ns, UTC]", "Int64"]


def test_an_unknown_column_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"no span table column 'tokens'; the columns are trace_id, span_id, "):
        span_table(profile_records(hand_built()), columns=["trace_id", "tokens"])
