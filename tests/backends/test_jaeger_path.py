"""README's path, end to end, with the real programs: the demo agent under ``opentelemetry-instrument`` with
the profiler -> an OpenTelemetry Collector running ``collector-config/otelcol-jaeger.yaml`` as shipped
(endpoints replaced, nothing else) -> Jaeger v2. Everything is read back through Jaeger's query API.

One pipeline and one demo run serve the whole module (they take a few seconds); each test asks one question.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from otel_agent_profiler.live import attributes
from tests.support.backends import HOST, artifact_dir, free_ports, wait_until
from tests.support.go_backends import Jaeger, Otelcol, jaeger_collector_config, require_go_backends
from tests.support.jaeger_ui_critical_path import jaeger_ui_critical_path_us
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

DEMO_SERVICE = "research-agent-demo"
# The demo's agent: 5 chat calls, 2 embeddings, 6 tool calls, 2 agents (tests/project/test_demo.py).
DEMO_SPANS = 15


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env.update(extra)
    return env


def run_demo(otlp_url: str, time_scale: str = "0.1") -> subprocess.CompletedProcess[str]:
    """``scripts/demo`` as README runs it, exporting to ``otlp_url`` (the collector's OTLP/gRPC receiver)."""
    env = demo_env(OTEL_EXPORTER_OTLP_ENDPOINT=otlp_url, OTEL_METRIC_EXPORT_INTERVAL="500")
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--time-scale", time_scale],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@dataclass
class JaegerRun:
    jaeger: Jaeger
    trace: dict[str, Any]  # Jaeger JSON of the demo's trace


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span.get("tags") or []}


def tag_types(span: dict[str, Any]) -> dict[str, str]:
    """Jaeger's type of each tag (its JSON writes a float64 0.0 as 0)."""
    return {tag["key"]: tag["type"] for tag in span.get("tags") or []}


def parent_of(span: dict[str, Any]) -> str | None:
    return next((r["spanID"] for r in span.get("references") or [] if r["refType"] == "CHILD_OF"), None)


@pytest.fixture(scope="module")
def jaeger_run() -> Iterator[JaegerRun]:
    logs = artifact_dir("e2e", __name__)
    require_go_backends()
    jaeger = Jaeger(logs).start()
    health, grpc, http, prom = free_ports(4)
    config = jaeger_collector_config(jaeger, health_port=health, grpc_port=grpc, http_port=http, prom_port=prom)
    collector = Otelcol(config, logs, health_port=health)
    try:
        collector.start()
        run_demo(f"http://{HOST}:{grpc}")
        trace_id = wait_for_trace_id(jaeger)
        trace = jaeger.wait_for_trace(trace_id, DEMO_SPANS)
        assert len(jaeger.get_json("/api/traces", {"service": DEMO_SERVICE})["data"]) == 1  # one run, one trace
        yield JaegerRun(jaeger, trace)
    finally:
        collector.stop()
        jaeger.stop()


def wait_for_trace_id(jaeger: Jaeger) -> str:
    """The id of the demo's trace, once Jaeger has it (the collector batches for 200 ms)."""

    def probe() -> str | None:
        data = jaeger.get_json("/api/traces", {"service": DEMO_SERVICE, "limit": "10"})["data"]
        return data[0]["traceID"] if data else None

    return wait_until(probe, 30, f"a trace of {DEMO_SERVICE} in Jaeger", interval=0.25)


def test_every_span_arrives_with_its_profile_attributes(jaeger_run: JaegerRun) -> None:
    spans = jaeger_run.trace["spans"]
    assert len(spans) == DEMO_SPANS
    assert len({s["spanID"] for s in spans}) == DEMO_SPANS
    for span in spans:
        found, types = tags(span), tag_types(span)
        for name in (attributes.SELF_TIME_MS, attributes.CRITICAL_PATH_MS):
            assert types.get(name) == "float64", (span["operationName"], name, found.get(name))
            assert found[name] >= 0
        assert types.get(attributes.ON_CRITICAL_PATH) == "bool", span["operationName"]
        if found[attributes.CRITICAL_PATH_MS] > 0:
            assert found[attributes.ON_CRITICAL_PATH] is True, span["operationName"]
        assert found.get(attributes.CATEGORY) in {"llm", "embedding", "tool", "agent", "internal"}
        # By default the operation is written on roots only (the other spans get the essential set).
        if span.get("references"):
            assert attributes.OPERATION not in found, span["operationName"]
        else:
            assert isinstance(found.get(attributes.OPERATION), str) and found[attributes.OPERATION]
    categories = {s["operationName"]: tags(s)[attributes.CATEGORY] for s in spans}
    assert categories["execute_tool fetch_url"] == "tool"
    assert categories["openai.embeddings"] == "embedding"
    assert categories["invoke_agent researcher"] == "agent"


def test_the_root_carries_the_trace_totals(jaeger_run: JaegerRun) -> None:
    spans = jaeger_run.trace["spans"]
    (root,) = [s for s in spans if parent_of(s) is None]
    assert root["operationName"] == "invoke_agent research_assistant"
    found = tags(root)
    assert found[attributes.TRACE_SPAN_COUNT] == DEMO_SPANS
    assert found[attributes.TRACE_COMPLETE] is True
    assert found[attributes.TRACE_LLM_CALLS] >= 1
    # The totals agree with the spans Jaeger holds: the trace's extent (µs in Jaeger) and the per-span
    # critical-path times, which tile the root.
    first = min(s["startTime"] for s in spans)
    last = max(s["startTime"] + s["duration"] for s in spans)
    assert found[attributes.TRACE_DURATION_MS] == pytest.approx((last - first) / 1000, abs=0.002)
    assert found[attributes.TRACE_CRITICAL_PATH_MS] == pytest.approx(root["duration"] / 1000, abs=0.002)
    per_span = sum(tags(s)[attributes.CRITICAL_PATH_MS] for s in spans)
    assert per_span == pytest.approx(found[attributes.TRACE_CRITICAL_PATH_MS], abs=0.001 * DEMO_SPANS)
    per_category = {
        key.removeprefix(attributes.TRACE_CATEGORY_CRITICAL_PATH_PREFIX): value
        for key, value in found.items()
        if key.startswith(attributes.TRACE_CATEGORY_CRITICAL_PATH_PREFIX)
    }
    assert per_category["llm"] > 0
    assert sum(per_category.values()) == pytest.approx(found[attributes.TRACE_CRITICAL_PATH_MS], abs=0.01)


def test_the_tag_search_readme_shows_finds_the_trace(jaeger_run: JaegerRun) -> None:
    def search(tag_query: dict[str, str]) -> set[str]:
        params = {"service": DEMO_SERVICE, "tags": json.dumps(tag_query), "limit": "20"}
        return {t["traceID"] for t in jaeger_run.jaeger.get_json("/api/traces", params)["data"]}

    # README: "in Jaeger, search the tag `agent_profiler.on_critical_path=true`".
    assert search({attributes.ON_CRITICAL_PATH: "true"}) == {jaeger_run.trace["traceID"]}
    assert search({attributes.CATEGORY: "tool", attributes.ON_CRITICAL_PATH: "true"}) == {jaeger_run.trace["traceID"]}
    assert search({attributes.CATEGORY: "no-such-category"}) == set()


def test_jaeger_would_draw_the_same_critical_path_as_ours(jaeger_run: JaegerRun) -> None:
    spans = jaeger_run.trace["spans"]
    theirs_us = jaeger_ui_critical_path_us(jaeger_run.trace)
    (root,) = [s for s in spans if parent_of(s) is None]
    assert sum(theirs_us.values()) == root["duration"]  # Jaeger UI's sections tile the root too
    ours_ms = {s["spanID"]: tags(s)[attributes.CRITICAL_PATH_MS] for s in spans}
    # Jaeger keeps microseconds (truncated), we profiled nanoseconds: a span's time gains or loses up to a
    # microsecond at each edge of each of its sections, and a parent has a few sections.
    ours_on_path = {sid for sid, ms in ours_ms.items() if ms > 0.002}
    assert ours_on_path == set(theirs_us), {
        s["operationName"]: (ours_ms[s["spanID"]], theirs_us.get(s["spanID"], 0) / 1000) for s in spans
    }
    for sid, us in theirs_us.items():
        assert ours_ms[sid] == pytest.approx(us / 1000, abs=0.02), sid
    flagged = {s["spanID"] for s in spans if tags(s)[attributes.ON_CRITICAL_PATH]}
    assert set(theirs_us) <= flagged
