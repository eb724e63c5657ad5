"""Context-window use per LLM call: in the JSON, the span table and (via expected_attributes) span attributes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from otel_agent_profiler.analytics import to_dataframe
from otel_agent_profiler.cli import main
from otel_agent_profiler.core.context_window import parse_context_windows, with_built_in_context_windows
from otel_agent_profiler.core.findings import DEFAULT_CONTEXT_WINDOWS, context_window
from otel_agent_profiler.core.pricing import BUILT_IN_PRICES
from tests.cli.test_cli_cost import _llm_trace

WINDOWS_ENV = "OTEL_AGENT_PROFILER_CONTEXT_WINDOWS"


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o-mini", 0.5), ("gpt-4o-mini-2024-07-18", 0.5), ("claude-sonnet-4", 0.32), ("unknown-model", None)],
)
def test_json_and_span_table_have_the_share_of_the_window_each_llm_call_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, expected: float | None
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_llm_trace(model, input_tokens=64_000)), encoding="utf-8")
    assert main(["analyze", "--format", "json", str(path)]) == 0
    spans = json.loads(capsys.readouterr().out)["traces"][0]["spans"]
    assert [span["context_window_use"] for span in spans] == [None, expected]
    column = to_dataframe(path)["context_window_use"]
    assert str(column.dtype) == "Float64"
    assert column.isna().tolist() == [True, expected is None]
    if expected is not None:
        assert column.iloc[1] == pytest.approx(expected)


def test_every_priced_model_has_a_context_window() -> None:
    missing = [model for model in BUILT_IN_PRICES if context_window(model, DEFAULT_CONTEXT_WINDOWS) is None]
    assert missing == []
    assert context_window("gpt-5-2025-08-07", DEFAULT_CONTEXT_WINDOWS) == 400_000
    assert context_window("claude-haiku-4-5-20251001", DEFAULT_CONTEXT_WINDOWS) == 200_000


def test_context_windows_come_from_json_text_a_file_or_a_mapping_and_are_laid_over_the_built_in_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "windows.json"
    path.write_text('{"my-llm": 32000, "gpt-4o": 64000}', encoding="utf-8")
    for given in ('{"my-llm": 32000, "gpt-4o": 64000}', str(path), path, {"my-llm": 32000, "gpt-4o": 64000}):
        windows = with_built_in_context_windows(parse_context_windows(given))
        assert (windows["my-llm"], windows["gpt-4o"], windows["gpt-5"]) == (32_000, 64_000, 400_000)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ('{"my-llm": 0}', "context window of 'my-llm' must be a whole number of tokens above 0, got 0"),
        ('{"my-llm": "big"}', "context window of 'my-llm' must be a whole number of tokens above 0, got 'big'"),
        ('{"my-llm": 1.5}', "must be a whole number of tokens above 0, got 1.5"),
        ('{"my-llm": true}', "got True"),
        ("{not json", "context-window table is not valid JSON"),
        ("missing.json", "cannot read context-window table 'missing.json'"),
        ("[1]", "cannot read context-window table"),
    ],
)
def test_unusable_context_windows_say_what_is_wrong(given: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_context_windows(given)


def _use_of(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    code = main(["analyze", "--format", "json", "--no-progress", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)["traces"][0]["spans"][1]["context_window_use"]


def test_context_windows_option_and_variable_give_a_model_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WINDOWS_ENV, raising=False)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_llm_trace("my-llm", input_tokens=64_000)), encoding="utf-8")
    assert _use_of(capsys, str(path)) is None
    assert _use_of(capsys, str(path), "--context-windows", '{"my-llm": 128000}') == 0.5
    monkeypatch.setenv(WINDOWS_ENV, '{"my-llm": 256000}')
    assert _use_of(capsys, str(path)) == 0.25
    assert _use_of(capsys, str(path), "--context-windows", '{"my-llm": 128000}') == 0.5
    # The large-prompt finding reads the same windows: 64,000 of 80,000 tokens is a large prompt.
    for windows, found in (('{"my-llm": 80000}', ["large_prompt"]), ('{"my-llm": 800000}', [])):
        code = main(
            ["analyze", str(path), "--format", "json", "--findings", "--min-saving", "0", "--context-windows", windows]
        )
        assert code == 0
        findings = json.loads(capsys.readouterr().out)["traces"][0]["findings"]
        assert [f["kind"] for f in findings if f["kind"] == "large_prompt"] == found


def test_report_summary_json_uses_the_given_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_llm_trace("my-llm", input_tokens=64_000)), encoding="utf-8")
    summary = tmp_path / "summary.json"
    args = ["report", str(path), "--html", str(tmp_path / "r.html"), "--summary-json", str(summary)]
    assert main([*args, "--context-windows", '{"my-llm": 128000}', "--no-progress"]) == 0
    spans = json.loads(summary.read_text())["traces"][0]["spans"]
    assert [span["context_window_use"] for span in spans] == [None, 0.5]


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_a_bad_context_windows_variable_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_llm_trace("my-llm")), encoding="utf-8")
    monkeypatch.setenv(WINDOWS_ENV, '{"my-llm": -1}')
    extra = ["--html", str(tmp_path / "r.html")] if command == "report" else []
    assert main([command, str(path), *extra, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"otel-agent-profiler: error: {WINDOWS_ENV}: context window of 'my-llm' must be")


def test_a_bad_context_windows_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "x.json", "--context-windows", '{"my-llm": "big"}'])
    assert exited.value.code == 2
    assert "argument --context-windows: context window of 'my-llm'" in capsys.readouterr().err
