"""Forecasting a run's remaining time and tokens: prefixes, the linear model, cross-validation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters.files import parse_trace_bytes
from otel_agent_profiler.analytics import fit_forecaster, prefix_table, span_table
from otel_agent_profiler.analytics.forecast import FEATURES, _folds
from otel_agent_profiler.core import profile_records
from tests.support.span_builders import CLIENT, TRACE_ID, span

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000


def chat(name, parent, start_ms, end_ms, trace_id=TRACE_ID, **usage):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    attributes.update({f"gen_ai.usage.{key}": value for key, value in usage.items()})
    start, end = EPOCH + start_ms * MS, EPOCH + end_ms * MS
    return span(name, parent, start, end, CLIENT, trace_id=trace_id, attributes=attributes)


def tool(name, parent, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return span(name, parent, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def agent(name, start_ms, end_ms, trace_id=TRACE_ID):
    attributes = {"gen_ai.operation.name": "invoke_agent"}
    return span(name, None, EPOCH + start_ms * MS, EPOCH + end_ms * MS, trace_id=trace_id, attributes=attributes)


def generated_table(runs: int, seed: int) -> pd.DataFrame:
    spans = [s for run in generate_runs(runs, seed=seed) for s in run]
    return span_table(profile_records(parse_trace_bytes(json.dumps(otlp_document(spans)).encode(), "g").records))


def test_prefixes_of_a_hand_built_run_are_exact() -> None:
    records = [
        agent("root", 0, 1000),
        chat("L1", "root", 0, 400, input_tokens=1200, output_tokens=80),
        tool("T1", "root", 400, 700),
        tool("T2", "root", 400, 550),
        chat("L2", "root", 700, 1000, input_tokens=300, output_tokens=50),
    ]
    cuts = prefix_table(profile_records(records))
    assert list(cuts.columns) == ["trace_id", *FEATURES, "remaining_ms", "remaining_tokens"]
    assert set(cuts["trace_id"]) == {TRACE_ID}
    # At the start, then when L1 (400 ms), T2 (550), T1 (700) and L2 (1000) end.
    assert cuts["elapsed_ms"].tolist() == [0.0, 400.0, 550.0, 700.0, 1000.0]
    assert cuts["steps"].tolist() == [0, 1, 2, 3, 4]
    assert cuts["llm_calls"].tolist() == [0, 1, 1, 1, 2]
    assert cuts["tokens"].tolist() == [0, 1280, 1280, 1280, 1630]
    assert cuts["remaining_ms"].tolist() == [1000.0, 600.0, 450.0, 300.0, 0.0]
    assert cuts["remaining_tokens"].tolist() == [1630, 350, 350, 350, 0]


def test_calls_ending_together_make_one_cut() -> None:
    records = [agent("root", 0, 500), tool("A", "root", 0, 200), tool("B", "root", 0, 200), tool("C", "root", 200, 300)]
    cuts = prefix_table(profile_records(records))
    assert cuts["elapsed_ms"].tolist() == [0.0, 200.0, 300.0]
    assert cuts["steps"].tolist() == [0, 2, 3]
    assert cuts["remaining_ms"].tolist() == [500.0, 300.0, 200.0]


def linear_runs(sizes: list[int]) -> list:
    """Runs whose tool call lasts as many ms as the LLM call before it used tokens: linear in the features."""
    records = []
    for number, size in enumerate(sizes):
        trace_id = f"{number + 1:032x}"
        offset = 10_000 * number
        records += [
            agent("root", offset, offset + 100 + size, trace_id=trace_id),
            chat("L", "root", offset, offset + 100, trace_id=trace_id, input_tokens=size, output_tokens=0),
            tool("T", "root", offset + 100, offset + 100 + size, trace_id=trace_id),
        ]
    return profile_records(records)


def test_linear_model_is_kept_when_it_beats_the_mean() -> None:
    forecaster = fit_forecaster(linear_runs([100 * i for i in range(1, 11)]), folds=5)
    evaluation = forecaster.evaluation.set_index("target")
    assert evaluation.loc["remaining_ms", "used"] == "linear"
    assert evaluation.loc["remaining_tokens", "used"] == "linear"
    assert evaluation.loc["remaining_ms", "model_mae"] < evaluation.loc["remaining_ms", "mean_mae"]
    assert (evaluation["folds"] == 5).all() and (evaluation["runs"] == 10).all() and (evaluation["cuts"] == 30).all()
    # After the LLM call of a new run that used 550 tokens, 550 ms of tool call remain, and no tokens.
    features = pd.DataFrame({"elapsed_ms": [100.0], "steps": [1], "llm_calls": [1], "tokens": [550]})
    predicted = forecaster.predict(features)
    assert predicted["remaining_ms"].iloc[0] == pytest.approx(550.0, abs=1e-6)
    assert predicted["remaining_tokens"].iloc[0] == pytest.approx(0.0, abs=1e-6)
    coefficients = forecaster.coefficients
    assert coefficients.loc["remaining_ms", "tokens"] == pytest.approx(1.0)
    assert coefficients.loc["remaining_ms", "elapsed_ms"] == pytest.approx(-1.0)


def test_mean_is_used_when_the_features_say_nothing() -> None:
    # No tool calls at all: every run has only its start as a cut, with all features 0.
    runs = linear_runs([100 * i for i in range(1, 9)])
    forecaster = fit_forecaster(runs, categories=("retrieval",), folds=4)
    evaluation = forecaster.evaluation.set_index("target")
    assert (evaluation["used"] == "mean").all()
    assert evaluation.loc["remaining_ms", "model_mae"] == pytest.approx(evaluation.loc["remaining_ms", "mean_mae"])
    assert forecaster.coefficients.empty
    predicted = forecaster.predict(pd.DataFrame({name: [0.0] for name in FEATURES}))
    assert predicted["remaining_ms"].iloc[0] == pytest.approx(np.mean([100 + 100 * i for i in range(1, 9)]))


def test_cross_validation_folds_are_seeded_and_balanced() -> None:
    folds = _folds(10, 3, seed=0)
    assert sorted(np.bincount(folds).tolist()) == [3, 3, 4]
    assert (folds == _folds(10, 3, seed=0)).all()
    assert not (folds == _folds(10, 3, seed=1)).all()


def test_generated_runs_report_both_errors_and_the_choice() -> None:
    history = generated_table(120, seed=3)
    forecaster = fit_forecaster(history)
    evaluation = forecaster.evaluation
    assert list(evaluation.columns) == ["target", "model_mae", "mean_mae", "used", "folds", "runs", "cuts"]
    assert evaluation["target"].tolist() == ["remaining_ms", "remaining_tokens"]
    for record in evaluation.itertuples():
        assert record.model_mae > 0 and record.mean_mae > 0
        assert record.used == ("linear" if record.model_mae < record.mean_mae else "mean")
        assert (record.folds, record.runs) == (5, 120)
    # Deterministic.
    pd.testing.assert_frame_equal(fit_forecaster(history).evaluation, evaluation)

    # A run in progress: its first 5 seconds.
    run = generated_table(1, seed=99)
    start = run["start"].min()
    now = start + pd.Timedelta(seconds=5)
    seen = run[run["start"] < now].copy()
    seen_end = seen["start"] + pd.to_timedelta(seen["duration_ms"], unit="ms")
    seen.loc[(seen_end > now).to_numpy(), "ended"] = False
    forecast = forecaster.forecast(seen, now=now)
    assert len(forecast) == 1
    row = forecast.iloc[0]
    assert row["elapsed_ms"] == pytest.approx(5000.0)
    done = seen[seen["ended"] & seen["category"].isin(["llm", "tool"]) & seen["counted"]]
    assert row["steps"] == len(done)
    assert row["remaining_ms"] >= 0 and row["remaining_tokens"] >= 0
    assert row["expected_total_ms"] == pytest.approx(row["elapsed_ms"] + row["remaining_ms"])
    assert row["remaining_ms_method"] in ("linear", "mean")


def test_forecast_defaults_to_the_last_finished_step() -> None:
    forecaster = fit_forecaster(linear_runs([100 * i for i in range(1, 11)]))
    records = [
        agent("root", 0, 100),
        chat("L", "root", 0, 100, input_tokens=300, output_tokens=0),
    ]
    forecast = forecaster.forecast(profile_records(records))
    row = forecast.iloc[0]
    assert (row["elapsed_ms"], row["steps"], row["llm_calls"], row["tokens"]) == (100.0, 1, 1, 300)
    assert row["remaining_ms"] == pytest.approx(300.0, abs=1e-6)
    assert row["expected_total_ms"] == pytest.approx(400.0, abs=1e-6)


def test_needs_two_runs() -> None:
    with pytest.raises(ValueError, match="two"):
        fit_forecaster(linear_runs([100]))
