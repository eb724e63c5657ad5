"""Folders given to the offline commands: read through symbolic links, each folder once, and a
broken link is one error line, as any file that cannot be read (issue 28, item 9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.cli import main
from tests.cli.test_cli import SPANS, otlp_document

ERROR = "otel-agent-profiler: error: "


def _write(path: Path, trace_id: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(otlp_document(SPANS, trace_id=trace_id)), encoding="utf-8")
    return path


def _analyze_json(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, dict[str, Any], list[str]]:
    code = main(["analyze", "--format", "json", *map(str, paths)])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err.splitlines()


def test_a_symbolic_link_to_a_folder_is_read_as_a_subfolder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    _write(runs / "a.json", "a" * 32)
    _write(tmp_path / "elsewhere" / "b.json", "b" * 32)
    (runs / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    code, document, err = _analyze_json(capsys, runs)
    assert (code, err) == (0, [])
    assert [file["path"] for file in document["files"]] == [str(runs / "a.json"), str(runs / "more" / "b.json")]
    assert sorted(trace["trace_id"] for trace in document["traces"]) == ["a" * 32, "b" * 32]


def test_a_link_back_up_the_tree_reads_each_folder_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    _write(runs / "a.json", "a" * 32)
    _write(runs / "day2" / "b.json", "b" * 32)
    (runs / "day2" / "all-runs").symlink_to(runs, target_is_directory=True)
    (runs / "again").symlink_to(runs / "day2", target_is_directory=True)
    code, document, err = _analyze_json(capsys, runs)
    assert (code, err) == (0, [])
    assert len(document["files"]) == 2
    assert sorted(trace["trace_id"] for trace in document["traces"]) == ["a" * 32, "b" * 32]


def test_a_broken_link_is_one_error_line_and_the_rest_is_analysed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    _write(runs / "a.json", "a" * 32)
    _write(runs / "b.json", "b" * 32)
    gone = tmp_path / "archive" / "c.json"
    (runs / "c.json").symlink_to(gone)
    (runs / "notes.txt").symlink_to(tmp_path / "gone.txt")  # not a trace file's name: not looked at
    code, document, err = _analyze_json(capsys, runs)
    assert code == 2  # as for any file that cannot be read
    assert err == [f"{ERROR}{runs / 'c.json'}: cannot read: broken symbolic link to {gone} (No such file or directory)"]
    assert sorted(trace["trace_id"] for trace in document["traces"]) == ["a" * 32, "b" * 32]


def test_diff_reports_a_broken_link_in_a_side_and_compares_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, candidate = tmp_path / "before", tmp_path / "after"
    for side in (baseline, candidate):
        for run in range(2):
            _write(side / f"run{run}.json", f"{side.name[0]}{run}".ljust(32, "0"))
    (candidate / "run9.json").symlink_to(tmp_path / "deleted.json")
    code = main(["diff", str(baseline), str(candidate), "--allow-few-runs", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.splitlines() == [
        f"{ERROR}{candidate / 'run9.json'}: cannot read: broken symbolic link to {tmp_path / 'deleted.json'} "
        "(No such file or directory)"
    ]
    assert captured.out.startswith("2 baseline runs, 2 candidate runs")
