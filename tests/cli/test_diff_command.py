"""`otel-agent-profiler diff`: regressions between two sets of runs, with an exit code for CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.cli.diff import EXIT_REGRESSION


def _write_runs(folder: Path, *, seed: int, slow_tool: str | None = None, factor: float = 1.0) -> Path:
    folder.mkdir()
    runs = generate_runs(60, seed=seed)
    for run in runs:
        for span in run:
            if slow_tool and span["name"] == f"execute_tool {slow_tool}":
                start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                span["endTimeUnixNano"] = str(start + int((end - start) * factor))
    half = len(runs) // 2
    for index, chunk in enumerate((runs[:half], runs[half:])):
        spans = [span for run in chunk for span in run]
        (folder / f"part-{index}.json").write_text(json.dumps(otlp_document(spans)))
    return folder


def test_the_same_runs_show_no_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    assert main(["diff", str(baseline), str(baseline)]) == 0
    out = capsys.readouterr().out
    assert "60 baseline runs, 60 candidate runs" in out and "no regression" in out


def test_a_slower_tool_is_a_regression_and_fails_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    candidate = _write_runs(tmp_path / "cand", seed=11, slow_tool="fetch_url", factor=1.6)
    assert main(["diff", str(baseline), str(candidate)]) == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert "regression" in out and "fetch_url" in out


def test_json_report_lists_every_compared_row(tmp_path: Path) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    candidate = _write_runs(tmp_path / "cand", seed=11, slow_tool="fetch_url", factor=1.6)
    out = tmp_path / "diff.json"
    assert main(["diff", str(baseline), str(candidate), "--format", "json", "--output", str(out)]) == EXIT_REGRESSION
    document = json.loads(out.read_text())
    assert document["regression"] is True and document["baseline_runs"] == 60
    rows = [r for r in document["rows"] if r["operation"] == "fetch_url" and r["metric"] == "duration_ms"]
    assert rows and rows[0]["verdict"] == "regression" and rows[0]["p_value"] < 0.05


def test_unreadable_input_is_reported_and_the_rest_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    (baseline / "broken.json").write_text('{"resourceSpans": [')
    assert main(["diff", str(baseline), str(baseline / "part-0.json")]) == 2
    captured = capsys.readouterr()
    assert "broken.json: truncated" in captured.err
    assert "baseline runs" in captured.out


def test_an_empty_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    baseline = _write_runs(tmp_path / "base", seed=11)
    assert main(["diff", str(baseline), str(tmp_path / "empty")]) == 2
    assert "no trace files" in capsys.readouterr().err


def test_holm_adjusts_the_p_values_and_is_echoed(tmp_path: Path) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    candidate = _write_runs(tmp_path / "cand", seed=11, slow_tool="fetch_url", factor=1.6)
    documents = {}
    for adjust in ("none", "holm"):
        out = tmp_path / f"diff-{adjust}.json"
        main(["diff", str(baseline), str(candidate), "--format", "json", "--output", str(out), "--p-adjust", adjust])
        documents[adjust] = json.loads(out.read_text())
    plain, holm = documents["none"], documents["holm"]
    assert (plain["p_adjust"], holm["p_adjust"]) == ("none", "holm")
    key = ("level", "category", "operation", "sample", "metric")
    plain_rows = {tuple(r[k] for k in key): r for r in plain["rows"]}
    tested = [r for r in holm["rows"] if r["p_value"] is not None]
    assert len(tested) > 1
    for row in tested:
        before = plain_rows[tuple(row[k] for k in key)]
        assert row["p_value"] == before["p_value"] == before["p_adjusted"]
        assert row["p_value"] <= row["p_adjusted"] <= 1.0
    # Holm multiplies the smallest p-value by the number of tests (capped at 1).
    smallest = min(tested, key=lambda r: r["p_value"])
    assert smallest["p_adjusted"] == pytest.approx(min(1.0, smallest["p_value"] * len(tested)))
    # The slowed tool is still a regression after the adjustment.
    assert holm["regression"] is True


def test_progress_bar_counts_files_and_steps_of_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    assert main(["diff", str(baseline), str(baseline), "--progress"]) == 0
    err = capsys.readouterr().err
    # Two files per side, plus profiling and tabling: 8 steps, then the comparison.
    assert "0/8 reading and profiling" in err
    assert "8/8 reading and profiling" in err
    assert "1/1 comparing" in err
    assert err.endswith("\r") and "\n" not in err
    assert main(["diff", str(baseline), str(baseline), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
