"""Golden reports: the text report of three trace shapes, checked in, and their HTML in a real browser.

The shapes are the demo agent's trace (recorded, tests/data/demo_trace.otlp.json), an agent that
calls three independent tools one after another, and a wide parallel fan-out. Their text reports
live in tests/data/golden/; a change to what a report says shows up as a diff of those files, to
be read as a user would. Regenerate them after a deliberate change with
``UPDATE_GOLDEN=1 pytest tests/report/test_golden_reports.py`` and read the diff.

The HTML report of each shape is rendered in headless Chromium, one screenshot per view, saved
under test-artifacts/golden/.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from otel_agent_profiler.cli import main
from tests.support.paths import DATA, ROOT

GOLDEN = DATA / "golden"
ARTIFACTS = ROOT / "test-artifacts" / "golden"
CHROMIUM = "/usr/bin/chromium"
#: The views of the HTML report, by the id of the card that holds each.
VIEWS = ("traces", "trace-view", "categories", "findings-card", "waterfall-card", "flame-card")


T0 = 1_795_554_442_000_000_000
MS = 1_000_000
TRACE_ID = "5b8efff798038103d269b633813fc60c"


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _span(span_id: int, parent: int | None, name: str, start_ms: float, end_ms: float, **attributes: Any) -> dict:
    span: dict[str, Any] = {
        "traceId": TRACE_ID,
        "spanId": f"{span_id:016x}",
        "name": name,
        "kind": "SPAN_KIND_CLIENT" if "gen_ai.request.model" in attributes else "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": str(T0 + int(start_ms * MS)),
        "endTimeUnixNano": str(T0 + int(end_ms * MS)),
        "attributes": [{"key": key.replace("__", "."), "value": _value(value)} for key, value in attributes.items()],
    }
    if parent is not None:
        span["parentSpanId"] = f"{parent:016x}"
    return span


def _agent(span_id: int, name: str, start_ms: float, end_ms: float) -> dict:
    return _span(
        span_id, None, f"invoke_agent {name}", start_ms, end_ms, gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name=name,
    )  # fmt: skip


def _chat(span_id: int, parent: int, model: str, start_ms: float, end_ms: float, tokens: tuple[int, int]) -> dict:
    return _span(
        span_id, parent, f"chat {model}", start_ms, end_ms, gen_ai__operation__name="chat",
        gen_ai__provider__name="openai", gen_ai__request__model=model, gen_ai__usage__input_tokens=tokens[0],
        gen_ai__usage__output_tokens=tokens[1],
    )  # fmt: skip


def _tool(span_id: int, parent: int, tool: str, start_ms: float, end_ms: float, **attributes: Any) -> dict:
    return _span(
        span_id, parent, f"execute_tool {tool}", start_ms, end_ms, gen_ai__operation__name="execute_tool",
        gen_ai__tool__name=tool, **attributes,
    )  # fmt: skip


def _document(spans: list[dict]) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "golden-agent"}}]},
                "scopeSpans": [{"scope": {"name": "golden"}, "spans": spans}],
            }
        ]
    }


def sequential_tools() -> dict:
    """Plan, then three tools one after another, then answer. The plan's recorded answer asks for
    all three at once, which shows they are independent."""
    tools = (("search_flights", 820), ("search_hotels", 640), ("get_weather", 410))
    calls = [{"type": "tool_call", "id": f"call_{tool}", "name": tool} for tool, _ in tools]
    plan = _chat(2, 1, "gpt-4o-mini", 10, 710, (1_200, 90))
    plan["attributes"].append(
        {"key": "gen_ai.output.messages", "value": _value(json.dumps([{"role": "assistant", "parts": calls}]))}
    )
    spans = [_agent(1, "travel_planner", 0, 3_260), plan]
    start = 720.0
    for span_id, (tool, took) in enumerate(tools, 3):
        spans.append(_tool(span_id, 1, tool, start, start + took, gen_ai__tool__call__id=f"call_{tool}"))
        start += took + 5
    spans.append(_chat(6, 1, "gpt-4o-mini", start, start + 650, (2_400, 310)))
    return _document(spans)


def parallel_fan_out() -> dict:
    """Plan, then twelve page fetches at once (one slow), then a summary."""
    spans = [_agent(1, "web_researcher", 0, 4_100), _chat(2, 1, "gpt-4o", 10, 900, (900, 140))]
    for index in range(12):
        took = 2_400 if index == 7 else 300 + 90 * index
        spans.append(_tool(10 + index, 1, "fetch_url", 910, 910 + took))
    spans.append(_chat(3, 1, "gpt-4o", 3_320, 4_090, (6_100, 420)))
    return _document(spans)


SHAPES = {
    "demo": lambda: json.loads((DATA / "demo_trace.otlp.json").read_text(encoding="utf-8")),
    "sequential_tools": sequential_tools,
    "parallel_fan_out": parallel_fan_out,
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("golden")
    paths = {}
    for name, build in SHAPES.items():
        path = directory / f"{name}.otlp.json"
        path.write_text(json.dumps(build()), encoding="utf-8")
        paths[name] = path
    return paths


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_text_report_matches_its_golden_file(
    shape: str, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(inputs[shape]), "--no-progress"]) == 0
    report = capsys.readouterr().out
    golden = GOLDEN / f"{shape}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(report, encoding="utf-8")
    assert report == golden.read_text(encoding="utf-8"), f"the report of {shape} changed: see {golden}"


def test_the_shapes_give_the_findings_they_are_for(inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Guards the golden files against being regenerated into nonsense."""
    main(["analyze", str(inputs["sequential_tools"]), "--no-progress"])
    sequential = capsys.readouterr().out
    assert "Run search_flights, search_hotels and get_weather together" in " ".join(sequential.split())
    assert "one LLM response requested them together" in " ".join(sequential.split())
    main(["analyze", str(inputs["parallel_fan_out"]), "--no-progress"])
    fan_out = capsys.readouterr().out
    # The slow fetch holds the critical path; the other eleven run beside it.
    assert "The 12 calls of tool fetch_url (1 of them on the critical path) hold 2.40 s" in fan_out
    assert "Where: 'execute_tool fetch_url' at 910 ms." in fan_out


@pytest.mark.e2e
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_view_of_the_html_report_renders(shape: str, inputs: dict[str, Path]) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test (it installs Debian's chromium)", pytrace=False)
    html = inputs[shape].with_suffix(".html")
    assert main(["report", str(inputs[shape]), "--html", str(html), "--no-progress"]) == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = html.read_text(encoding="utf-8")
    assert all(f'<section class="card" id="{view}">' in page for view in VIEWS), "the report's views changed"
    for view in VIEWS:
        screenshot = ARTIFACTS / f"{shape}-{view}.png"
        screenshot.unlink(missing_ok=True)
        # One view per page: the other cards hidden, so the screenshot shows this one from its top.
        alone = html.with_name(f"{shape}-{view}.html")
        style = f"<style>section.card:not(#{view}) {{ display: none; }}</style></head>"
        alone.write_text(page.replace("</head>", style, 1), encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            subprocess.run(
                [
                    CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
                    f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--window-size=1400,1000",
                    f"--screenshot={screenshot}", alone.as_uri(),
                ],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
        assert screenshot.exists() and screenshot.stat().st_size > 10_000, f"no screenshot of {view} for {shape}"
