"""analyze --on-disk: inputs bigger than memory, partitioned by trace id into temporary shards.

The report must be the one the in-memory path writes, byte for byte, whatever the options; the
temporary files must go, Ctrl-C included.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.agent_traces import generate_runs, otlp_document
from otel_agent_profiler.adapters import files
from otel_agent_profiler.cli import main
from otel_agent_profiler.offline import shards
from otel_agent_profiler.offline.on_disk import NOT_ON_DISK


def _write_json_lines(path: Path, spans: list[dict], per_line: int) -> None:
    """As the Collector's file exporter writes them: each line a batch of spans of many traces."""
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, len(spans), per_line):
            out.write(json.dumps(otlp_document(spans[start : start + per_line])) + "\n")


def _shuffled_spans(traces: int, seed: int) -> list[dict]:
    spans = [span for run in generate_runs(traces, seed=seed) for span in run]
    random.Random(seed).shuffle(spans)
    return spans


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two JSON Lines files sharing traces, and one OTLP JSON document."""
    folder = tmp_path_factory.mktemp("inputs")
    spans = _shuffled_spans(120, seed=21)
    half = len(spans) // 2
    _write_json_lines(folder / "a.jsonl", spans[:half], per_line=23)
    _write_json_lines(folder / "b.jsonl", spans[half:], per_line=41)
    extra = [span for run in generate_runs(5, seed=4, first_trace=500) for span in run]
    (folder / "c.json").write_text(json.dumps(otlp_document(extra)), encoding="utf-8")
    return [str(folder / name) for name in ("a.jsonl", "b.jsonl", "c.json")]


def _analyze(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, argv: list[str]) -> tuple[int, bytes, str]:
    out = tmp_path / name
    code = main(["analyze", *argv, "-o", str(out)])
    return code, out.read_bytes() if out.exists() else b"", capsys.readouterr().err


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--all"],
        ["--top", "7", "--ascii", "--max-spans", "10"],
        ["--format", "json"],
        ["--format", "json", "--findings", "--what-if", "llm=2x", "--budget", "duration=20s"],
        ["--budget", "cost=0.001", "--min-saving", "0"],
        ["--workers", "2"],
        ["--format", "json", "--workers", "3"],
    ],
    ids=["text", "all", "top-ascii", "json", "json-findings-what-if-budget", "budget", "workers", "json-workers"],
)
def test_on_disk_writes_what_memory_writes(
    inputs: list[str], options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    in_memory = _analyze(capsys, tmp_path, "memory", [*inputs, *options, "--no-on-disk"])
    on_disk = _analyze(capsys, tmp_path, "disk", [*inputs, *options, "--on-disk"])
    assert on_disk == in_memory
    code, report, _ = on_disk
    assert code in (0, 4) and len(report) > 5_000


def test_three_traces_or_fewer_are_all_shown_as_in_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "three.jsonl"
    _write_json_lines(path, _shuffled_spans(3, seed=2), per_line=7)
    assert _analyze(capsys, tmp_path, "d", [str(path), "--on-disk"]) == _analyze(
        capsys, tmp_path, "m", [str(path), "--no-on-disk"]
    )


def test_broken_lines_are_named_and_the_rest_is_analysed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.jsonl"
    _write_json_lines(path, _shuffled_spans(30, seed=8), per_line=19)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = "{" + lines[2]  # malformed
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # truncated, as a crash mid-write leaves it
    path.write_text("\n".join(lines), encoding="utf-8")

    code, report, err = _analyze(capsys, tmp_path, "d", [str(path), "--on-disk", "--format", "json"])
    assert (code, report, err) == _analyze(capsys, tmp_path, "m", [str(path), "--no-on-disk", "--format", "json"])
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"{path}: read " in err and "line 3: malformed JSON" in err
    assert f"line {len(lines)}: truncated: the last line is incomplete" in err
    assert len(json.loads(report)["traces"]) >= 25


def test_options_that_need_the_traces_in_memory_are_refused(
    inputs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _analyze(capsys, tmp_path, "d", [inputs[0], "--on-disk", "--prefix-cache"])
    assert code == 2
    assert err.strip().splitlines() == [f"otel-agent-profiler: error: --prefix-cache {NOT_ON_DISK}"]


def test_large_json_lines_inputs_go_on_disk_by_default(inputs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert not shards.on_disk_wanted(inputs, None)
    monkeypatch.setattr(shards, "_MIB", 1)  # every file counts, whatever its size
    monkeypatch.setattr(shards, "ON_DISK_BYTES", os.path.getsize(inputs[0]))
    assert shards.on_disk_wanted(inputs, None)
    assert not shards.on_disk_wanted([inputs[2]], None), "one JSON document is read whole anyway"
    assert not shards.on_disk_wanted(inputs, False)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_json_lines_are_told_from_one_document_at_any_chunk_boundary(
    inputs: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    # The scan for a second line reads in chunks, so a whole document on one line is never held.
    monkeypatch.setattr(files, "_SCAN_CHUNK", chunk)
    line = json.dumps(otlp_document([span for run in generate_runs(1, seed=3) for span in run]))
    cases = {
        "one document": (line, False),
        "one document and a newline": (line + "\n\n  \n", False),
        "blank lines first": ("\n \n" + line + "\n", False),
        "blank lines of every ASCII whitespace": (line + "\r\n\t\x0b\x0c\r\n \n", False),
        "two lines": (line + "\n" + line + "\n", True),
        "two lines, blank between": (line + "\n\n \n" + line, True),
        "two lines, not OTLP": ('{"a": 1}\n{"b": 2}\n', False),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / "input.json"
        path.write_text(text, encoding="utf-8")
        assert files.looks_like_json_lines(path) is expected, name
    assert files.looks_like_json_lines(inputs[0]) and not files.looks_like_json_lines(inputs[2])


def test_temporary_files_are_removed(inputs: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert main(["analyze", *inputs, "--on-disk", "-o", str(tmp_path / "out")]) == 0
    assert list(temporary.iterdir()) == []


@pytest.mark.e2e
def test_ctrl_c_removes_the_temporary_files_and_exits_130(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    _write_json_lines(path, _shuffled_spans(3000, seed=5), per_line=50)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    command = [sys.executable, "-m", "otel_agent_profiler", "analyze", str(path), "--on-disk", "-o", os.devnull]
    environment = {**os.environ, "TMPDIR": str(temporary)}
    process = subprocess.Popen(command, env=environment, stderr=subprocess.PIPE, text=True, start_new_session=True)
    # Interrupt once shards are being written (the whole group, as a terminal's Ctrl-C does).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None and not list(temporary.glob("*/shard-*")):
        time.sleep(0.01)
    assert process.poll() is None, "finished before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("options", [[], ["--format", "json"]], ids=["text", "json"])
def test_split_llm_calls_are_found_across_shards(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.core.test_split_traces import langchain_zero_code_document

    document = langchain_zero_code_document()
    path = tmp_path / "split.jsonl"
    # A line per resource: the agent's spans and the client's copies arrive apart.
    lines = [json.dumps({"resourceSpans": [resource]}) for resource in document["resourceSpans"]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    on_disk = _analyze(capsys, tmp_path, "d", [str(path), "--on-disk", *options])
    assert on_disk == _analyze(capsys, tmp_path, "m", [str(path), "--no-on-disk", *options])
    report = on_disk[1].decode()
    if options:
        assert len(json.loads(report)["split_llm_calls"]) == 2
    else:
        assert "2 LLM-only traces repeat 2 LLM calls" in report


@pytest.mark.parametrize("top", [3, 7, None])
def test_the_text_report_shard_by_shard_is_the_one_made_from_every_profile(
    inputs: list[str], top: int | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In memory the text report of many traces is profiled shard by shard too: it must be the
    report written from every trace's whole profile and findings at once."""
    from otel_agent_profiler.core.findings import find_all
    from otel_agent_profiler.core.pricing import with_built_in_prices
    from otel_agent_profiler.offline import load_profiles
    from otel_agent_profiler.report.cross_trace import REPORT_MAX_LINES, render_many_traces

    profiles = load_profiles(inputs, prices=with_built_in_prices(None)).profiles
    findings = {profile.trace_id: find_all(profile) for profile in profiles}
    expected = render_many_traces(
        profiles, top=top, max_spans=60, findings=findings, max_lines=REPORT_MAX_LINES if top is not None else None
    )
    shown = ["--all"] if top is None else ["--top", str(top)]
    code, report, _ = _analyze(capsys, tmp_path, "text", [*inputs, *shown, "--no-on-disk", "--workers", "2"])
    assert code == 0
    assert report.decode() == expected
