"""`otel-agent-profiler diff`: regressions between two sets of runs, with an exit code for CI."""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main
from otel_agent_profiler.cli.diff import EXIT_REGRESSION, EXIT_TOO_FEW_RUNS


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


def _write_slowed_runs(path: Path, count: int, *, seed: int, factor: float = 1.0) -> Path:
    """``count`` generated runs in one OTLP file, each run's spans ``factor`` times as long (and as late)."""
    runs = generate_runs(count, seed=seed)
    for run in runs:
        start = min(int(span["startTimeUnixNano"]) for span in run)
        for span in run:
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(start + int((int(span[key]) - start) * factor))
    path.write_text(json.dumps(otlp_document([span for run in runs for span in run])))
    return path


# Runs slowed by 40% whose per-call samples happen not to show it: with so few runs only the run
# totals could, and they cannot be tested. Seeds chosen so that every per-call row passes.
@pytest.mark.parametrize(("runs", "candidate_seed"), [(1, 8), (3, 13)])
def test_too_few_runs_to_decide_is_said_and_fails_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: int, candidate_seed: int
) -> None:
    baseline = _write_slowed_runs(tmp_path / "base.json", runs, seed=5)
    candidate = _write_slowed_runs(tmp_path / "cand.json", runs, seed=candidate_seed, factor=1.4)
    assert main(["diff", str(baseline), str(candidate), "--no-progress"]) == EXIT_TOO_FEW_RUNS
    out = capsys.readouterr().out
    assert "no regression" not in out
    assert "too few runs to decide: a test needs at least 5 runs a side" in out

    # Allowed, the gate passes, and the report still says why it proves nothing.
    assert main(["diff", str(baseline), str(candidate), "--no-progress", "--allow-few-runs"]) == 0
    assert "too few runs to decide" in capsys.readouterr().out

    report = tmp_path / "diff.json"
    code = main(["diff", str(baseline), str(candidate), "--no-progress", "--format", "json", "-o", str(report)])
    assert code == EXIT_TOO_FEW_RUNS
    document = json.loads(report.read_text())
    assert document["regression"] is False and document["too_few_runs"] is True and document["min_runs"] == 5
    run_rows = [row for row in document["rows"] if row["level"] == "run"]
    assert run_rows and all(row["verdict"] == "insufficient_data" for row in run_rows)
    untested = [row for row in document["rows"] if row["verdict"] == "insufficient_data"]
    assert document["untested_rows"] == len(untested)


def test_enough_runs_of_the_same_slowdown_show_the_regression(tmp_path: Path) -> None:
    baseline = _write_slowed_runs(tmp_path / "base.json", 20, seed=5)
    candidate = _write_slowed_runs(tmp_path / "cand.json", 20, seed=13, factor=1.4)
    report = tmp_path / "diff.json"
    code = main(["diff", str(baseline), str(candidate), "--no-progress", "--format", "json", "-o", str(report)])
    assert code == EXIT_REGRESSION
    document = json.loads(report.read_text())
    assert document["too_few_runs"] is False and document["untested_rows"] < len(document["rows"])
    run_rows = [row for row in document["rows"] if row["level"] == "run"]
    assert run_rows and all(row["verdict"] != "insufficient_data" for row in run_rows)


def test_a_regression_found_with_few_runs_still_fails_as_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _write_slowed_runs(tmp_path / "base.json", 3, seed=5)
    candidate = _write_slowed_runs(tmp_path / "cand.json", 3, seed=5, factor=1.85)
    assert main(["diff", str(baseline), str(candidate), "--no-progress"]) == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert "all llm calls, duration per call: " in out and "too few runs to decide" in out


def test_standard_input_is_one_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline = _write_runs(tmp_path / "base", seed=11)
    candidate = _write_runs(tmp_path / "cand", seed=11, slow_tool="fetch_url", factor=1.6)
    spans = []
    for part in sorted(candidate.glob("*.json")):
        spans.extend(json.loads(part.read_text())["resourceSpans"])
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps({"resourceSpans": spans}).encode())))
    assert main(["diff", str(baseline), "-", "--no-progress"]) == EXIT_REGRESSION
    captured = capsys.readouterr()
    assert "60 baseline runs, 60 candidate runs" in captured.out and "fetch_url" in captured.out
    assert captured.err == ""


def test_standard_input_cannot_be_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["diff", "-", "-"])
    assert exited.value.code == 2
    assert "standard input (-) can be one side only" in capsys.readouterr().err


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


def _codes_run_returns() -> set[int]:
    """The exit codes ``diff``'s ``run`` can return, read from its return statements."""
    from otel_agent_profiler.cli import diff

    tree = ast.parse(inspect.getsource(diff.run))
    codes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            codes.add(node.value.value if isinstance(node.value, ast.Constant) else getattr(diff, node.value.id))
    return codes


def test_help_lists_every_exit_code_with_analyze_s_precedence_wording(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = text.split("Exit codes: ", 1)[1].split(". ", 1)[0]
    # Each code listed once, as "N words", and exactly the codes the command returns (argparse's 2 included).
    codes = [int(code) for code in re.findall(r"(?:^|, )(\d+) [a-z]", listed)]
    assert sorted(codes) == sorted(_codes_run_returns() | {2}) == [0, 1, 2, 3, 5]
    assert "1 the output could not be written, 2 some input could not be read or the command line was wrong" in listed
    # Which code wins when two apply, said as analyze --help says it ("checked last: ...").
    assert "3 a regression (checked before unreadable input" in listed
    assert "(checked last: a run with unreadable input exits 2" in listed
