"""Budgets (--budget, exit code 4) and what-ifs (--what-if) on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.cli import EXIT_BAD_INPUT, EXIT_BUDGET_EXCEEDED, EXIT_OK, main
from otel_agent_profiler.cli.budgets import what_if_text
from otel_agent_profiler.core.findings import what_ifs_together
from tests.support.paths import DATA, ROOT
from tests.support.span_builders import profile, span

DEMO = str(DATA / "demo_trace.otlp.json")
MS = 1_000_000


@pytest.fixture(autouse=True)
def _no_prices_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_AGENT_PROFILER_PRICES", raising=False)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["analyze", DEMO, "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _budget_findings(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in document["traces"][0]["findings"] if f["kind"] == "budget_exceeded"]


# Budgets


def test_budgets_the_trace_keeps_exit_0_and_add_no_finding(capsys: pytest.CaptureFixture[str]) -> None:
    code, document, err = _json(
        capsys, "--budget", "cost=0.50", "--budget", "duration=30s", "--budget", "tokens=200000"
    )
    assert code == EXIT_OK
    assert err == ""
    # A budget turns the findings on in JSON, so the overruns can be read there.
    assert "findings" in document["traces"][0]
    assert _budget_findings(document) == []


def test_trace_budgets_exceeded_are_findings_and_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    code, document, err = _json(capsys, "--budget", "cost=0.001", "--budget", "duration=2s", "--budget", "tokens=5000")
    assert code == EXIT_BUDGET_EXCEEDED
    titles = sorted(f["title"] for f in _budget_findings(document))
    assert titles == [
        "The trace exceeds its cost budget: $0.0078, $0.0068 over the budget of $0.0010.",
        "The trace exceeds its duration budget: 4.07 s end to end, 2.07 s over the budget of 2.00 s.",
        "The trace exceeds its tokens budget: 9,005 tokens, 4,005 over the budget of 5,000.",
    ]
    # One line per overrun on standard error, for CI logs, whatever the format.
    lines = err.splitlines()
    assert len(lines) == 3
    assert all(line.startswith("otel-agent-profiler: budget exceeded: trace 3117fbb61d46f55c") for line in lines)


@pytest.mark.parametrize(
    ("budget", "title"),
    [
        ("llm.tokens=1000", "LLM calls exceed their tokens budget: 8,"),
        ("llm.duration=500ms", "LLM calls exceed their duration budget: 3.07 s on the critical path, 2.57 s over"),
        ("llm.cost=0.0001", "LLM calls exceed their cost budget: $0.0078, $0.0077 over the budget of $0.0001."),
        ("tool.duration=0.1m", None),
        ("tool.duration=100ms", "Tool calls exceed their duration budget: 543 ms on the critical path, 443 ms over"),
    ],
)
def test_category_budgets(capsys: pytest.CaptureFixture[str], budget: str, title: str | None) -> None:
    code, document, _ = _json(capsys, "--budget", budget)
    findings = _budget_findings(document)
    if title is None:
        assert code == EXIT_OK
        assert findings == []
        return
    assert code == EXIT_BUDGET_EXCEEDED
    assert len(findings) == 1
    assert findings[0]["title"].startswith(title)
    assert findings[0]["category"] == budget.split(".")[0]
    assert findings[0]["suggestion"]


def test_budgets_show_in_the_text_report_first(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", DEMO, "--budget", "llm.tokens=1000"])
    out, err = capsys.readouterr()
    assert code == EXIT_BUDGET_EXCEEDED
    assert "1. LLM calls exceed their tokens budget" in out
    assert "budget exceeded" in err


def test_budgets_are_checked_with_no_findings_too(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", DEMO, "--no-findings", "--budget", "tokens=10"])
    out, err = capsys.readouterr()
    assert code == EXIT_BUDGET_EXCEEDED
    assert "What to change" not in out
    assert "exceeds its tokens budget" in err


def test_report_budgets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    summary = tmp_path / "s.json"
    code = main(["report", DEMO, "--html", str(html), "--summary-json", str(summary), "--budget", "tokens=10"])
    _, err = capsys.readouterr()
    assert code == EXIT_BUDGET_EXCEEDED
    assert "exceeds its tokens budget" in err
    assert "exceeds its tokens budget" in html.read_text(encoding="utf-8")
    assert main(["report", DEMO, "--html", str(html), "--budget", "tokens=1000000"]) == EXIT_OK


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cost=abc", "argument --budget: 'abc' is not an amount of US dollars, such as 0.50"),
        ("speed=3", "argument --budget: unknown measure 'speed' in 'speed=3'; one of cost, duration, tokens"),
        ("gpu.tokens=3", "argument --budget: unknown category 'gpu' in 'gpu.tokens=3'; one of llm, embedding,"),
        ("duration=30", "argument --budget: '30' is not a duration such as 30s, 500ms or 2m"),
        ("tokens=1.5", "argument --budget: '1.5' is not a whole number of tokens"),
        ("tokens", "argument --budget: expected MEASURE=LIMIT or CATEGORY.MEASURE=LIMIT, such as cost=0.50"),
        ("cost=-1", "argument --budget: a budget must be a finite number of at least 0, got '-1'"),
    ],
)
def test_bad_budgets_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str, message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", DEMO, "--budget", value])
    assert exited.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"otel-agent-profiler analyze: error: {message}")
    assert "Traceback" not in err


# What-ifs


def test_what_if_text_gives_the_projected_duration_and_the_new_critical_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["analyze", DEMO, "--what-if", "llm:gpt-4o-mini=2x", "--what-if", "tool=0.5x"])
    out, _ = capsys.readouterr()
    assert code == EXIT_OK
    section = out[out.index("What if") :]
    assert section.startswith(
        "What if gpt-4o-mini calls were twice as fast and tool calls were twice as slow (together)\n"
    )
    assert "  The trace would take " in section
    assert "  Its critical path would run through " in section


def test_what_if_text_names_time_that_adds_up_to_the_new_critical_path() -> None:
    # The agent's own code holds half of the path (before, between and after its children): naming only
    # the tool and the LLM call (400 ms) for a 900 ms path would not add up.
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    lookup = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    records = [
        span("agent", None, 0, 1000 * MS, attributes=agent),
        span("lookup", "agent", 100 * MS, 300 * MS, attributes=lookup),
        span("chat", "agent", 400 * MS, 700 * MS, attributes=chat),
    ]
    trace = profile(records)
    changes = [("tool", 2.0)]
    text = what_if_text([trace], changes, {trace.trace_id: what_ifs_together(trace, changes)})
    assert text == (
        "\n"
        "What if tool calls were twice as fast\n"
        "  The trace would take 900 ms instead of 1.00 s (100 ms sooner, 10% less).\n"
        "  Its critical path would run through 'agent' itself for 500 ms, 'lookup' for\n"
        "    100 ms and 'chat' (gpt-4o) for 300 ms.\n"
    )


def test_what_if_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, document, _ = _json(capsys, "--what-if", "llm=2x", "--what-if", "tool:search_kb=0.5x")
    assert code == EXIT_OK
    what_if = document["traces"][0]["what_if"]
    assert what_if["changes"] == [
        {"selector": "llm", "speedup": 2.0, "matched_spans": 5},
        {"selector": "tool:search_kb", "speedup": 0.5, "matched_spans": 2},
    ]
    assert what_if["duration_ns"] == round(document["traces"][0]["duration_ms"] * 1e6)
    assert 0 < what_if["projected_duration_ns"] < what_if["duration_ns"]
    assert what_if["saving_ns"] == what_if["duration_ns"] - what_if["projected_duration_ns"]
    path = what_if["critical_path"]
    assert path and {"span_id", "name", "category", "operation", "start_offset_ns", "duration_ns"} <= set(path[0])
    starts = [step["start_offset_ns"] for step in path]
    assert starts == sorted(starts)
    # The path ends where the projected trace ends.
    assert max(step["start_offset_ns"] + step["duration_ns"] for step in path) <= what_if["projected_duration_ns"]


def test_what_if_unchanged_reproduces_the_recorded_critical_path(capsys: pytest.CaptureFixture[str]) -> None:
    _, document, _ = _json(capsys, "--what-if", "llm=1x")
    trace = document["traces"][0]
    assert trace["what_if"]["saving_ns"] == 0
    on_path = {s["span_id"] for s in trace["spans"] if s["on_critical_path"] and s["critical_path_ms"] > 0}
    assert {step["span_id"] for step in trace["what_if"]["critical_path"]} <= on_path


def test_no_what_if_field_without_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    _, document, _ = _json(capsys)
    assert "what_if" not in document["traces"][0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nonsense", "argument --what-if: expected SELECTOR=FACTOR, such as llm:gpt-4o=2x, got 'nonsense'"),
        ("gpu=2x", "argument --what-if: unknown category 'gpu' in 'gpu=2x'; one of llm, embedding,"),
        ("llm=fast", "argument --what-if: 'fast' is not a factor such as 2x (twice as fast) or 0.5x"),
        ("llm=0x", "argument --what-if: the factor must be above 0 and finite, got '0x'"),
    ],
)
def test_bad_what_ifs_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str, message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", DEMO, "--what-if", value])
    assert exited.value.code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"otel-agent-profiler analyze: error: {message}")


def test_help_documents_budgets_what_ifs_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--budget MEASURE=LIMIT" in out
    assert "--what-if SELECTOR=FACTOR" in out
    assert "2x = twice as fast" in out
    assert "exit codes: 0" in out.lower()
    assert "4 a budget was exceeded" in out


@pytest.mark.e2e
def test_exit_code_4_from_a_real_process(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "otel_agent_profiler", "analyze", DEMO, "--budget", "duration=1s"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if k != "OTEL_AGENT_PROFILER_PRICES"},
            "PYTHONPATH": str(ROOT),
        },
    )
    assert result.returncode == 4
    assert "The trace exceeds its duration budget" in result.stdout
    assert result.stderr.startswith("otel-agent-profiler: budget exceeded: trace ")
    assert "Traceback" not in result.stderr
