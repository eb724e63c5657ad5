"""Cost on the offline commands: --prices, $OTEL_AGENT_PROFILER_PRICES, the built-in prices, ATIF's cost_usd."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.cli import main
from otel_agent_profiler.core.genai import TokenUsage
from otel_agent_profiler.core.pricing import BUILT_IN_PRICES, PriceTable, parse_prices, with_built_in_prices
from tests.adapters.test_atif import TRAJECTORY
from tests.cli.test_cli import otlp_document

PRICES_ENV = "OTEL_AGENT_PROFILER_PRICES"


def _llm_trace(model: str, input_tokens: int = 1_000_000, output_tokens: int = 100_000) -> dict[str, Any]:
    """An agent span and one LLM call of ``model`` with the given token usage."""
    specs = [
        {"id": "00000000000000a1", "parent": None, "name": "agent", "start": 0, "end": 100, "kind": "internal",
         "attrs": {"gen_ai.operation.name": "invoke_agent"}},
        {"id": "00000000000000b2", "parent": "00000000000000a1", "name": f"chat {model}", "start": 10, "end": 90,
         "kind": "client", "attrs": {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                                     "gen_ai.usage.input_tokens": input_tokens,
                                     "gen_ai.usage.output_tokens": output_tokens}},
    ]  # fmt: skip
    return otlp_document(specs)


@pytest.fixture(autouse=True)
def _no_prices_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRICES_ENV, raising=False)


def _write(tmp_path: Path, name: str, document: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _analyze_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["analyze", "--format", "json", *args]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_built_in_prices_cost_a_known_model_and_its_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1M input tokens at $0.15 and 100k output tokens at $0.60 per million; a snapshot's cost is
    # reported under its family, the snapshot kept on the span.
    for model in ("gpt-4o-mini", "gpt-4o-mini-2024-07-18"):
        trace = _analyze_json(capsys, str(_write(tmp_path, "t.json", _llm_trace(model))))["traces"][0]
        assert trace["cost_usd"] == pytest.approx(0.15 + 0.06)
        assert trace["cost_by_model"] == {"gpt-4o-mini": pytest.approx(0.21)}
        (llm,) = [span for span in trace["spans"] if span["category"] == "llm"]
        assert llm["model_snapshot"] == (model if model != "gpt-4o-mini" else None)


def test_prices_option_takes_json_or_a_file_and_beats_the_built_in_prices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "t.json", _llm_trace("gpt-4o-mini"))
    prices = '{"gpt-4o-mini": {"input": 1, "output": 10}}'
    price_file = tmp_path / "prices.json"
    price_file.write_text(prices, encoding="utf-8")
    for given in (prices, str(price_file)):
        trace = _analyze_json(capsys, str(path), "--prices", given)["traces"][0]
        assert trace["cost_usd"] == pytest.approx(1.0 + 1.0)


def test_an_empty_price_table_prices_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "t.json", _llm_trace("gpt-4o-mini"))
    assert _analyze_json(capsys, str(path), "--prices", "{}")["traces"][0]["cost_usd"] is None
    monkeypatch.setenv(PRICES_ENV, "{}")
    assert _analyze_json(capsys, str(path))["traces"][0]["cost_usd"] is None


def test_the_environment_variable_works_offline_and_the_option_beats_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "t.json", _llm_trace("my-model"))
    assert _analyze_json(capsys, str(path))["traces"][0]["cost_usd"] is None
    monkeypatch.setenv(PRICES_ENV, '{"my-model": {"input": 2, "output": 0}}')
    assert _analyze_json(capsys, str(path))["traces"][0]["cost_usd"] == pytest.approx(2.0)
    flag = '{"my-model": {"input": 3, "output": 0}}'
    assert _analyze_json(capsys, str(path), "--prices", flag)["traces"][0]["cost_usd"] == pytest.approx(3.0)


def test_a_bad_environment_variable_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "t.json", _llm_trace("gpt-4o"))
    monkeypatch.setenv(PRICES_ENV, '{"gpt-4o": {"input": "cheap"}}')
    for command in (["analyze"], ["report", "--html", str(tmp_path / "r.html")], ["export", "--format", "chrome",
                                                                                   "-o", "-"]):  # fmt: skip
        assert main([*command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"otel-agent-profiler: error: {PRICES_ENV}: price 'input'")
    assert main(["diff", str(path), str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"otel-agent-profiler: error: {PRICES_ENV}:")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{not json", "price table is not valid JSON"),
        ("/no/such/prices.json", "cannot read price table"),
        ('{"gpt-4o": {"input": -1, "output": 1}}', "must not be negative"),
        ("[1, 2]", "cannot read price table"),
    ],
)
def test_a_bad_prices_option_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, message: str
) -> None:
    path = _write(tmp_path, "t.json", _llm_trace("gpt-4o"))
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(path), "--prices", given])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --prices" in err and message in err and "Traceback" not in err


def test_text_report_shows_the_cost_only_when_the_trace_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(_write(tmp_path, "a.json", _llm_trace("gpt-4o")))]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    # 1M input tokens at $2.50, 100k output at $10 per million.
    assert header.endswith("1 LLM call · 1,100,000 tokens · $3.50"), header
    assert main(["analyze", str(_write(tmp_path, "b.json", _llm_trace("unpriced-model")))]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert "$" not in header and header.endswith("1,100,000 tokens")


def test_atif_cost_usd_is_the_cost_of_its_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "run.json", TRAJECTORY)
    trace = _analyze_json(capsys, str(path), "--prices", '{"claude-sonnet-4": {"input": 1000, "output": 1000}}')
    step_costs = sorted(span["cost_usd"] for span in trace["traces"][0]["spans"] if span["cost_usd"] is not None)
    # Step 2 recorded $0.01 (used as is, whatever the prices); step 3 is gpt-4o-mini at the built-in price.
    assert step_costs == [pytest.approx((2000 * 0.15 + 20 * 0.60) / 1e6), pytest.approx(0.01)]


def test_html_report_has_a_cost_column_only_with_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "r.html"
    assert main(["report", str(_write(tmp_path, "a.json", _llm_trace("gpt-4o"))), "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert '<th class="num">cost</th>' in html and '<td class="num">$3.50</td>' in html
    assert main(["report", str(_write(tmp_path, "b.json", _llm_trace("unpriced"))), "--html", str(page)]) == 0
    assert '<th class="num">cost</th>' not in page.read_text(encoding="utf-8")
    assert "1 trace, 2 spans" in capsys.readouterr().err


def test_diff_compares_the_cost_of_the_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sides = {}
    for side, output_tokens in (("before", 100_000), ("after", 300_000)):
        folder = tmp_path / side
        folder.mkdir()
        for run in range(6):
            trace = _llm_trace("gpt-4o", output_tokens=output_tokens + run)
            for span in trace["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                span["traceId"] = f"{run + 1:032x}"
            _write(folder, f"run{run}.json", trace)
        sides[side] = str(folder)
    out = tmp_path / "diff.json"
    code = main(["diff", sides["before"], sides["after"], "--format", "json", "-o", str(out), "--no-progress"])
    assert code == 3
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    cost = next(row for row in rows if row["level"] == "run" and row["metric"] == "cost_usd")
    assert cost["baseline_mean"] == pytest.approx(3.5, abs=1e-3)
    assert cost["candidate_mean"] == pytest.approx(5.5, abs=1e-3)
    assert cost["verdict"] == "regression"


def test_export_accepts_prices(tmp_path: Path) -> None:
    out = tmp_path / "t.chrome.json"
    path = _write(tmp_path, "t.json", _llm_trace("gpt-4o"))
    assert (
        main(
            ["export", str(path), "--format", "chrome", "-o", str(out), "--prices", '{"x": {"input": 1, "output": 1}}']
        )
        == 0
    )
    assert json.loads(out.read_text(encoding="utf-8"))


def test_every_offline_help_describes_prices(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("analyze", "report", "diff", "export"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        help_text = re.sub(r"\s+", " ", capsys.readouterr().out)
        assert "--prices FILE|JSON" in help_text and PRICES_ENV in help_text and "built-in" in help_text


def test_parse_prices_and_the_built_in_table() -> None:
    table = parse_prices('{"m": {"input": 1, "output": 2, "cached_input": 0.5}}')
    assert table.cost_usd("m", TokenUsage(input=2_000_000, output=1_000_000, cached_input=1_000_000)) == pytest.approx(
        1.0 + 0.5 + 2.0
    )
    merged = with_built_in_prices(PriceTable.from_mapping({"gpt-4o": {"input": 0, "output": 0}}))
    assert merged.cost_usd("gpt-4o", TokenUsage(input=1000, output=1000)) == 0.0
    assert merged.cost_usd("gpt-4o-mini", TokenUsage(input=1_000_000)) == pytest.approx(0.15)
    for price in BUILT_IN_PRICES.values():
        assert price.input >= 0 and price.output >= 0
