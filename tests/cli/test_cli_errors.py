"""The command line's user errors and wording: one error line, exit code 2, help that tells the truth.

The defects of issue 13 ("CLI defects"), each held by a test.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler import cli
from otel_agent_profiler.cli import main
from tests.cli.test_cli import SPANS, otlp_document
from tests.support.paths import ROOT


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("command", ["analyze", "report", "diff", "export", "serve"])
def test_help_mentions_only_options_that_exist(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli._build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    options = {option for action in subparsers.choices[command]._actions for option in action.option_strings}
    with pytest.raises(SystemExit):
        main([command, "--help"])
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", capsys.readouterr().out))
    assert mentioned - options == set(), f"{command} --help mentions options it does not have"


def test_analyze_report_and_export_read_folders_as_diff_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    _write(folder / "a.json", otlp_document(SPANS))
    _write(folder / "nested" / "b.jsonl", otlp_document(SPANS, trace_id="1" * 32))
    (folder / "notes.txt").write_text("not a trace", encoding="utf-8")
    assert main(["analyze", "--format", "json", str(folder)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [file["path"] for file in document["files"]] == [str(folder / "a.json"), str(folder / "nested" / "b.jsonl")]
    assert len(document["traces"]) == 2
    assert main(["report", str(folder), "--html", str(tmp_path / "r.html")]) == 0
    assert main(["export", str(folder), "--format", "chrome", "-o", str(tmp_path / "t.json")]) == 0
    capsys.readouterr()


def test_an_empty_folder_is_one_error_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    good = _write(tmp_path / "good.json", otlp_document(SPANS))
    assert main(["analyze", str(tmp_path / "empty"), str(good)]) == 2
    captured = capsys.readouterr()
    assert _error_lines(captured.err) == [
        f"otel-agent-profiler: error: {tmp_path / 'empty'}: no trace files (*.json, *.jsonl, *.ndjson) in this folder"
    ]
    assert "Is a directory" not in captured.err and captured.out.startswith("Trace ")


def test_diff_output_in_a_missing_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path / "good.json", otlp_document(SPANS))
    out = tmp_path / "missing" / "dir" / "x"
    # Exit code 1: README's "the report could not be written".
    assert main(["diff", str(good), str(good), "-o", str(out), "--no-progress"]) == cli.EXIT_FAILURE
    assert _error_lines(capsys.readouterr().err) == [
        f"otel-agent-profiler: error: cannot write {out}: No such file or directory"
    ]


def _chain_trace(length: int) -> dict[str, Any]:
    """A root with ``length`` sequential children, all on the critical path."""
    specs = [
        {
            "id": f"{1:016x}",
            "parent": None,
            "name": "root",
            "start": 0,
            "end": 10 * length,
            "kind": "internal",
            "attrs": {},
        }
    ]
    specs += [
        {"id": f"{i + 2:016x}", "parent": f"{1:016x}", "name": f"step {i}", "start": 10 * i, "end": 10 * i + 10,
         "kind": "internal", "attrs": {}}
        for i in range(length)
    ]  # fmt: skip
    return otlp_document(specs)


def test_a_cut_span_tree_says_how_many_hidden_spans_are_on_the_critical_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "chain.json", _chain_trace(30))
    assert main(["analyze", str(path), "--max-spans", "5"]) == 0
    out = capsys.readouterr().out
    assert "… 26 more spans, 26 of them on the critical path (--max-spans N shows more)" in out
    assert "off the critical path (--max-spans" not in out
    assert main(["analyze", "--max-spans", "2", str(_write(tmp_path / "small.json", otlp_document(SPANS)))]) == 0
    assert "… 3 more spans, 2 of them on the critical path" in capsys.readouterr().out


def test_reports_write_one_duration_format_and_real_plurals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "one.json", _chain_trace(1))
    assert main(["analyze", str(path), str(ROOT / "examples" / "traces" / "research-agent.otlp.json")]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"\d(?:ns|µs|ms|s)\b", out) == [], "a duration without the space of the SI form"
    assert re.search(r"\d (?:ms|s)\b", out)
    assert "  10.0 ms · 2 spans" in out
    assert re.search(r"\b1 (?:spans|traces|LLM calls|tokens|roots)\b", out) is None


def test_serve_user_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert = str(tmp_path / "cert.pem")
    for args, message in (
        (["--bearer-token-file", str(tmp_path / "missing")], "cannot read --bearer-token-file"),
        (["--tls-cert", cert], "--tls-cert and --tls-key go together"),
        (["--http-port", "0", "--grpc-port", "0", "--tls-cert", cert, "--tls-key", cert], "cannot load TLS"),
        (["--http-port", "0", "--grpc-port", "0", "--upstream", "ftp://x", "--upstream-protocol", "http"], "upstream"),
    ):
        assert main(["serve", *args]) == cli.EXIT_BAD_INPUT, args
        lines = _error_lines(capsys.readouterr().err)
        assert len(lines) == 1 and message in lines[0], lines


@pytest.mark.parametrize("which", ["--http-port", "--grpc-port"])
def test_serve_names_the_port_in_use(which: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = {"--http-port": "0", "--grpc-port": "0", which: str(port)}
        result = subprocess.run(
            [sys.executable, "-m", "otel_agent_profiler", "serve", *[x for pair in args.items() for x in pair]],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == cli.EXIT_BAD_INPUT
    receiver = "OTLP/HTTP" if which == "--http-port" else "OTLP/gRPC"
    assert _error_lines(result.stderr) == [
        f"otel-agent-profiler: error: cannot serve: {receiver} port {port} on 127.0.0.1 is already in use"
    ]


def test_demo_rejects_a_negative_time_scale_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--time-scale", "-1"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == "python -m demo: error: argument --time-scale: must be 0 or more, got -1"
