"""`analyze FILE --trace ID`: the report of the traces asked for, as `report` and `export` choose one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.cli import main


@pytest.fixture(scope="module")
def runs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "runs.json"
    path.write_text(json.dumps(otlp_document([span for run in generate_runs(6) for span in run])), encoding="utf-8")
    return path


def _trace_ids(path: Path) -> list[str]:
    return sorted({span["traceId"] for resource in json.loads(path.read_text())["resourceSpans"]
                   for scope in resource["scopeSpans"] for span in scope["spans"]})  # fmt: skip


def test_only_the_trace_asked_for_is_reported(runs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wanted = _trace_ids(runs_file)[4]
    assert main(["analyze", str(runs_file), "--trace", wanted, "--no-progress"]) == 0
    report = capsys.readouterr().out
    assert report.startswith(f"Trace {wanted}\n")
    assert report.count("\nTrace ") == 0


def test_several_traces_and_short_ids(runs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _trace_ids(runs_file)[:2]
    # Leading zeros may be left out, as a 64-bit (Jaeger) id is written.
    short = first.lstrip("0") or "0"
    assert main(["analyze", str(runs_file), "--trace", short, "--trace", second.upper(), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [trace["trace_id"] for trace in document["traces"]] == [first, second]


def test_a_trace_the_files_do_not_hold_is_one_error_line(runs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(runs_file), "--trace", "ab" * 16, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"otel-agent-profiler: error: no trace {'ab' * 16} in the input (6 traces read)"
    ]


def test_a_trace_id_that_is_not_hex_is_a_usage_error(runs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", str(runs_file), "--trace", "not-hex"])
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "argument --trace: 'not-hex' is not a hex trace id" in line


def test_on_disk_cannot_choose_a_trace(runs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(runs_file), "--trace", "1", "--on-disk", "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("--trace profiles the traces it names in memory: leave out --on-disk")
