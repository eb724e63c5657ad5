"""Every example runs as its README says, and shows what it claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from demo.fake_llm import FakeOpenAIServer
from tests.support.backends import Rotel
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
INSTRUMENT = str(Path(sys.executable).with_name("opentelemetry-instrument"))
REPORT_ONLY = {
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_AGENT_PROFILER_CONSOLE_REPORT": "true",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    # opentelemetry-instrumentation-httpx is installed for the demo's server spans; the examples'
    # reports are checked with the spans of the OpenAI instrumentation alone.
    env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = "httpx,httpx2"
    env.update(extra)
    return env


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(time_scale=0.05) as server:
        yield server


@pytest.mark.e2e
def test_zero_code_example_is_profiled_without_profiler_code(fake_llm: FakeOpenAIServer) -> None:
    env = _env(OPENAI_BASE_URL=fake_llm.base_url, OPENAI_API_KEY="demo", **REPORT_ONLY)
    result = _run([INSTRUMENT, sys.executable, "examples/zero_code/agent.py"], env)
    report = result.stderr
    assert "otel-agent-profiler: 1 trace profiled" in report
    assert "3 spans" in report and "1 LLM call" in report and "1 LLM calls" not in report
    for name in ("invoke_agent support", "execute_tool lookup_order", "openai.chat"):
        assert name in report


@pytest.mark.e2e
def test_programmatic_example_exports_enriched_spans(rotel_factory: Callable[..., Rotel]) -> None:
    rotel = rotel_factory()
    result = _run([sys.executable, "examples/programmatic/app.py"], _env(OTEL_EXPORTER_OTLP_ENDPOINT=rotel.grpc_url))
    assert result.stdout.strip() == "average 101.75"
    assert "Where the time went" in result.stderr
    spans = rotel.wait_for_spans(lambda ss: len(ss) >= 3)
    assert {s.name for s in spans} == {"invoke_agent analyst", "execute_tool fetch_prices", "execute_tool summarize"}
    assert all(s.attributes["agent_profiler.on_critical_path"] is True for s in spans)
    root = next(s for s in spans if not s.parent_id)
    assert root.attributes["agent_profiler.trace.span_count"] == 3


@pytest.mark.e2e
def test_parallel_tools_example_puts_only_the_slowest_tool_on_the_critical_path(tmp_path: Path) -> None:
    env = _env(**{**REPORT_ONLY, "OTEL_AGENT_PROFILER_CONSOLE_REPORT": "false", "OTEL_TRACES_EXPORTER": "console"})
    result = _run([INSTRUMENT, sys.executable, "examples/parallel_tools/agent.py"], env)
    decoder = json.JSONDecoder()
    text, spans, index = result.stdout, {}, result.stdout.find("{")
    while index != -1:
        span, end = decoder.raw_decode(text, index)
        spans[span["name"]] = span["attributes"]
        index = text.find("{", end)
    on_path = {name for name, attributes in spans.items() if attributes["agent_profiler.on_critical_path"]}
    assert on_path == {"invoke_agent planner", "execute_tool web_search"}
    tool_self_ms = sum(a["agent_profiler.self_time_ms"] for n, a in spans.items() if n.startswith("execute_tool"))
    assert tool_self_ms == pytest.approx(600, abs=100)
    assert spans["execute_tool web_search"]["agent_profiler.critical_path_ms"] == pytest.approx(300, abs=60)


@pytest.mark.e2e
def test_offline_analysis_example(tmp_path: Path) -> None:
    cli = str(Path(sys.executable).with_name("otel-agent-profiler"))
    text = _run([cli, "analyze", "examples/traces/research-agent.otlp.json"], _env()).stdout
    assert "Where the time went" in text and "Span tree" in text
    out = tmp_path / "profile.json"
    _run([cli, "analyze", "examples/traces/research-agent.otlp.json", "--format", "json", "--output", str(out)], _env())
    document = json.loads(out.read_text())
    assert document["traces"][0]["span_count"] == 30
