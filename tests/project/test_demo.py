"""The bundled demo: `python -m demo`, as scripts/demo runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.backends import Rotel
from tests.support.paths import ROOT

DEMO = [sys.executable, "-m", "demo", "--time-scale", "0.1"]
# scripts/demo runs it from the repository root, where the demo package is.
# The demo's agent: 5 chat calls, 2 embeddings, 6 tool calls, 2 agents.
EXPECTED_SPANS = 15


def _demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env.update(extra)
    return env


@pytest.mark.e2e
def test_demo_prints_the_report_without_any_collector() -> None:
    result = subprocess.run(DEMO, cwd=ROOT, env=_demo_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    report = result.stderr
    assert "not exporting" in report
    assert "otel-agent-profiler: 1 trace profiled" in report
    assert "Where the time went" in report and "Span tree" in report
    assert f"{EXPECTED_SPANS} spans" in report
    for operation in ("gpt-4o-mini", "fetch_url", "search_kb", "research_assistant"):
        assert operation in report
    assert "answer (" in result.stdout


@pytest.mark.e2e
def test_demo_exports_enriched_spans_and_metrics_when_an_endpoint_is_set(
    rotel_factory: Callable[..., Rotel],
) -> None:
    rotel = rotel_factory()
    # Each span's operation is the reference for the metric's count below; by default only roots carry it.
    env = _demo_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=rotel.grpc_url,
        OTEL_METRIC_EXPORT_INTERVAL="500",
        OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES="all",
    )
    result = subprocess.run(DEMO, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"exporting spans and metrics over OTLP to {rotel.grpc_url}" in result.stderr

    spans = rotel.wait_for_spans(lambda ss: len(ss) >= EXPECTED_SPANS, timeout=20)
    assert len(spans) == EXPECTED_SPANS
    assert len({s.trace_id for s in spans}) == 1
    for span in spans:
        assert isinstance(span.attributes.get("agent_profiler.self_time_ms"), float), span.name
        assert isinstance(span.attributes.get("agent_profiler.on_critical_path"), bool), span.name
    (root,) = [s for s in spans if not s.parent_id]
    assert root.name == "invoke_agent research_assistant"
    assert root.attributes["agent_profiler.trace.span_count"] == EXPECTED_SPANS
    assert root.attributes["agent_profiler.trace.llm_calls"] == 5
    categories: dict[str, Any] = {s.name: s.attributes["agent_profiler.category"] for s in spans}
    assert categories["execute_tool fetch_url"] == "tool"
    assert categories["openai.embeddings"] == "embedding"
    assert categories["invoke_agent researcher"] == "agent"

    self_time = rotel.wait_for_metric("agent_profiler.operation.self_time", timeout=20)
    # One total per operation (the model, each tool, each agent), not per span: its spans' self times.
    expected: dict[tuple[str, str], float] = {}
    for s in spans:
        key = (s.attributes["agent_profiler.category"], s.attributes["agent_profiler.operation"])
        expected[key] = expected.get(key, 0.0) + s.attributes["agent_profiler.self_time_ms"] / 1000
    totals = {
        (p.attributes["agent_profiler.category"], p.attributes["agent_profiler.operation"]): p.values["Value"]
        for p in self_time.data_points
    }
    assert len(totals) == len(expected) < EXPECTED_SPANS
    assert totals == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.e2e
def test_demo_with_server_spans_splits_llm_calls_and_shows_queueing_when_tools_fan_out() -> None:
    command = [sys.executable, "-m", "demo", "--server-spans", "--time-scale", "0.3"]
    result = subprocess.run(command, cwd=ROOT, env=_demo_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    report = result.stderr
    assert "vLLM-like server at" in report and "1 running at once" in report
    assert "otel-agent-profiler: 1 trace profiled" in report
    # The agent's 5 chat calls, and one inside each of the 3 fanned-out tools and the sub-agent's
    # search_kb; each also has the HTTP client's span and the server's llm_request span, counted once.
    assert "9 LLM calls" in report
    assert "Inside the LLM calls on the critical path" in report
    unit_ms = {"s": 1000.0, "ms": 1.0, "µs": 0.001}
    phases = {
        name: float(value.replace(",", "")) * unit_ms[unit]
        for name, value, unit in re.findall(r"^  (queue|prefill|decode|other)\s+(\d[\d.,]*) (s|ms|µs)", report, re.M)
    }
    assert set(phases) == {"queue", "prefill", "decode", "other"}, report
    # The three tools ask the model at once and the server runs one request at a time: they queue.
    assert phases["queue"] > 30, report
    assert "llm_request" in report
    # The agent's profiler polled the server's /metrics: the calls carry its load, read back from their spans.
    assert "polled by the agent's profiler" in report
    assert re.search(r"^Server load: \d+ LLM calls met ", report, re.M), report
