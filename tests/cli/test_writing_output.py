"""What the offline commands leave behind when their output cannot be written (issue 28, item 9).

A file is written whole or not at all; standard output that is full is one error line and exit
code 1; a reader that went away (``| head -1``) is a quiet exit 1. These are the process's
behaviour (its exit, its last flush, its resource limits), so the command runs as a subprocess.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import DATA, ROOT
from tests.support.store_servers import Answer, StoreServer, jaeger_answer, jaeger_trace

DEMO = DATA / "demo_trace.otlp.json"
#: Each command's report of the demo trace is larger than this, so writing it fails part-way.
FILE_SIZE_LIMIT = 100
ERROR = "otel-agent-profiler: error: "


def _command(*argv: str | Path) -> list[str]:
    return [sys.executable, "-m", "otel_agent_profiler", *map(str, argv)]


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _small_files() -> None:
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG ("File too large"),
    # as a write to a full disk fails with ENOSPC, part-way through the output.
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _run_with_small_files(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*argv),
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_small_files,  # run in the child before it starts: it sets only its own limit
    )


WRITERS = {
    "analyze -o": ("analyze", DEMO, "-o", "{out}"),
    "analyze --format json -o": ("analyze", DEMO, "--format", "json", "-o", "{out}"),
    "report --html": ("report", DEMO, "--html", "{out}", "--no-progress"),
    "export speedscope -o": ("export", DEMO, "--format", "speedscope", "-o", "{out}"),
    "export chrome -o": ("export", DEMO, "--format", "chrome", "-o", "{out}"),
    "diff -o": ("diff", DEMO, DEMO, "--allow-few-runs", "--no-progress", "-o", "{out}"),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_an_output_file_that_fails_part_way_is_left_as_it_was(writer: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("the previous report\n", encoding="utf-8")
    argv = [str(arg).format(out=out) for arg in WRITERS[writer]]
    result = _run_with_small_files(*argv)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1:] == [f"{ERROR}cannot write {out}: File too large"]
    assert "Traceback" not in result.stderr
    assert out.read_text(encoding="utf-8") == "the previous report\n"
    assert os.listdir(tmp_path) == ["out"]


def test_a_summary_json_that_fails_part_way_leaves_no_file(tmp_path: Path) -> None:
    # The page goes to the null device, which a file-size limit does not apply to: only the summary fails.
    summary = tmp_path / "summary.json"
    result = _run_with_small_files("report", DEMO, "--html", os.devnull, "--summary-json", summary, "--no-progress")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [f"{ERROR}cannot write {summary}: File too large"]
    assert os.listdir(tmp_path) == []


@pytest.fixture
def jaeger() -> Iterator[StoreServer]:
    from otel_agent_profiler.adapters.files import read_trace_file

    answer = Answer(200, jaeger_answer([jaeger_trace(read_trace_file(DEMO).records)]))
    with StoreServer({"/api/traces": answer}) as server:
        yield server


def test_a_saved_store_answer_that_fails_part_way_leaves_no_file(jaeger: StoreServer, tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    result = _run_with_small_files("analyze", "--jaeger", jaeger.url, "--service", "s", "--save", saved)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"{ERROR}cannot write {saved}: File too large"]
    assert os.listdir(tmp_path) == []


COMMANDS_ON_STANDARD_OUTPUT = {
    "analyze": ("analyze", DEMO),
    "analyze --format json": ("analyze", DEMO, "--format", "json"),
    "export -o -": ("export", DEMO, "--format", "speedscope", "-o", "-"),
    "diff": ("diff", DEMO, DEMO, "--allow-few-runs", "--no-progress"),
}


@pytest.mark.parametrize("command", COMMANDS_ON_STANDARD_OUTPUT)
def test_a_full_standard_output_is_one_error_line_and_exit_1(command: str) -> None:
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            _command(*COMMANDS_ON_STANDARD_OUTPUT[command]),
            env=_environment(),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
        )
    assert (result.returncode, result.stderr) == (
        1,
        f"{ERROR}cannot write to standard output: No space left on device\n",
    )


@pytest.mark.parametrize("command", COMMANDS_ON_STANDARD_OUTPUT)
def test_a_reader_gone_away_is_a_quiet_exit_1(command: str) -> None:
    process = subprocess.Popen(
        _command(*COMMANDS_ON_STANDARD_OUTPUT[command]),
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    # Closed before the command writes anything (its start alone takes longer than this line):
    # its first write finds no reader, as with `| head -1` after the first line.
    process.stdout.close()
    _, err = process.communicate(timeout=180)
    assert (process.returncode, err) == (1, "")
