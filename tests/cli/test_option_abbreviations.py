"""Long options are spelled out: an abbreviation is an error, never taken silently for another option."""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_agent_profiler import cli
from otel_agent_profiler.cli import main
from tests.support.paths import DATA, ROOT

DEMO = DATA / "demo_trace.otlp.json"


def test_analyze_trace_is_not_taken_for_a_trace_stores_trace_id(capsys: pytest.CaptureFixture[str]) -> None:
    # analyze took `--trace` for `--trace-id` and asked for a trace store; it is now analyze's own option,
    # as export's and report's: the trace of the file.
    assert main(["analyze", str(DEMO), "--trace", "3117fbb61d46f55cf6cbf3613fd3a3ba", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Trace 3117fbb61d46f55cf6cbf3613fd3a3ba\n")
    assert captured.err == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", str(DEMO), "--form", "json"],
        ["export", str(DEMO), "--format", "chrome", "-o", "-", "--pric", "{}"],
        ["diff", str(DEMO), str(DEMO), "--thresh", "0.2"],
        ["serve", "--grpc", "not-a-port"],  # spelled out, serve would start and run
    ],
)
def test_no_command_accepts_an_abbreviated_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    abbreviation = next(arg for arg in argv[1:] if arg.startswith("--") and not arg.startswith("--format"))
    assert f"unrecognized arguments: {abbreviation}" in capsys.readouterr().err


def test_every_option_spelled_out_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(DEMO), "--format", "json", "--no-findings", "--min-saving", "0"]) == 0
    capsys.readouterr()


def test_every_parser_refuses_abbreviations() -> None:
    parser = cli._build_parser()
    commands = next(action for action in parser._actions if action.dest == "command")
    assert not parser.allow_abbrev
    assert [name for name, command in commands.choices.items() if command.allow_abbrev] == []


def test_the_demo_refuses_abbreviations_too() -> None:
    # A negative scale: were `--time` taken for `--time-scale`, the demo would not start either.
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--time", "-1"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "python -m demo: error: unrecognized arguments: --time -1"
