"""Metrics beside the traces, for real: an instrumented agent running a few traces, the collector running
``collector-config/otelcol-jaeger.yaml`` as shipped (endpoints replaced), Jaeger behind it, and a real
Prometheus scraping the collector's ``prometheus`` exporter. Every Prometheus query of the Grafana dashboard
(``collector-config/grafana/dashboards/agent-profiler.json``) must return data for this healthy run, and the
spanmetrics connector's series must be there beside ours.

A dashboard shows rates and increases, which need a counter to grow while Prometheus watches: the agent
here is one long-lived process running the demo's agent three times, seconds apart (one demo run per
process would give every counter a single value, and every rate 0).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from demo.fake_llm import FakeOpenAIServer
from tests.backends.test_jaeger_path import DEMO_SERVICE
from tests.support.backends import HOST, BackendError, Prometheus, artifact_dir, free_ports, wait_until
from tests.support.go_backends import Jaeger, Otelcol, jaeger_collector_config, require_go_backends
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

DASHBOARD = ROOT / "collector-config" / "grafana" / "dashboards" / "agent-profiler.json"
RUNS = 3
# Grafana's values for the dashboard's variables with "All" selected and a 1 s scrape interval.
RATE_INTERVAL = "4s"
QUANTILE = "0.95"

AGENT_LOOP = f"""
import asyncio, time
from demo.agent import answer
for run in range({RUNS}):
    asyncio.run(answer("How did our sales do this quarter?"))
    time.sleep(2.5)
"""


def dashboard_targets() -> list[tuple[str, str, str]]:
    """(panel title, datasource type, query) of every query on the dashboard."""

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from panels(item.get("panels") or [])

    found = []
    for panel in panels(json.loads(DASHBOARD.read_text())["panels"]):
        for target in panel.get("targets") or []:
            kind = (target.get("datasource") or panel.get("datasource") or {}).get("type", "")
            found.append((panel["title"], kind, target.get("expr") or target.get("query") or ""))
    return found


def as_prometheus_query(expr: str, window_s: int) -> str:
    """The query Grafana sends: the dashboard's variables replaced by what "All" and the range give."""
    for variable, value in {
        "$__rate_interval": RATE_INTERVAL,
        "$__range": f"{window_s}s",
        "$category": ".*",
        "$root_operation": ".*",
        "$quantile": QUANTILE,
    }.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


@dataclass
class MetricsRun:
    prometheus: Prometheus
    start: float
    end: float

    def query_range(self, promql: str) -> list[dict[str, Any]]:
        """Every step of the run (1 s), as a dashboard panel asks: ``data.result`` of a range query."""
        return self.prometheus._api(  # the launcher has no range query of its own
            "/api/v1/query_range",
            {"query": promql, "start": f"{self.start:.3f}", "end": f"{self.end:.3f}", "step": "1"},
        )["result"]

    def finite_values(self, promql: str) -> list[float]:
        return [
            float(value)
            for series in self.query_range(promql)
            for _, value in series["values"]
            if not math.isnan(float(value)) and not math.isinf(float(value))
        ]


@pytest.fixture(scope="module")
def metrics_run() -> Iterator[MetricsRun]:
    logs = artifact_dir("e2e", __name__)
    require_go_backends()
    jaeger = Jaeger(logs).start()
    health, grpc, http, prom_port = free_ports(4)
    config = jaeger_collector_config(jaeger, health_port=health, grpc_port=grpc, http_port=http, prom_port=prom_port)
    collector = Otelcol(config, logs, health_port=health)
    # Scraped as compose's prometheus.yml does (honor_labels), every second.
    prometheus = Prometheus([f"{HOST}:{prom_port}"], logs / "prometheus-data", logs, name="prometheus")
    scrape_config = prometheus.config_path.read_text()
    assert scrape_config.count("    static_configs:") == 1
    prometheus.config_path.write_text(
        scrape_config.replace("    static_configs:", "    honor_labels: true\n    static_configs:")
    )
    try:
        collector.start()
        prometheus.start()
        wait_until(
            lambda: any(t["health"] == "up" for t in prometheus.targets()),
            30,
            "Prometheus to scrape the collector",
            interval=0.5,
        )
        start = time.time()
        with FakeOpenAIServer(time_scale=0.2) as server:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
            env |= {
                "PYTHONPATH": str(ROOT),
                "OTEL_SERVICE_NAME": DEMO_SERVICE,
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{HOST}:{grpc}",
                "OTEL_METRIC_EXPORT_INTERVAL": "500",
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": "demo",
            }
            instrument = str(Path(sys.executable).with_name("opentelemetry-instrument"))
            result = subprocess.run(
                [instrument, sys.executable, "-c", AGENT_LOOP],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert result.returncode == 0, result.stderr[-3000:]
        time.sleep(3)  # the last export and two more scrapes
        yield MetricsRun(prometheus, start, time.time())
    finally:  # each stop is a no-op for a program that did not start
        prometheus.stop()
        collector.stop()
        jaeger.stop()


PROMETHEUS_TARGETS = [(title, query) for title, kind, query in dashboard_targets() if kind == "prometheus"]


def test_the_dashboard_queries_prometheus_and_tempo_only() -> None:
    # Tempo (TraceQL) is AGPL and does not run here; its queries stay checked structurally
    # (tests/project/test_collector_config.py). Everything else must be a Prometheus query tested below.
    kinds = {kind for _, kind, _ in dashboard_targets()}
    assert kinds == {"prometheus", "tempo"}
    assert len(PROMETHEUS_TARGETS) >= 14


@pytest.mark.parametrize(
    ("title", "expr"), PROMETHEUS_TARGETS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(PROMETHEUS_TARGETS)]
)
def test_every_dashboard_query_returns_data_in_a_healthy_run(metrics_run: MetricsRun, title: str, expr: str) -> None:
    window = int(metrics_run.end - metrics_run.start) + 1
    promql = as_prometheus_query(expr, window)
    values = metrics_run.finite_values(promql)
    assert values, f"{title!r} shows no data: {promql}"


def test_no_span_was_exported_unprofiled_and_the_panel_says_0(metrics_run: MetricsRun) -> None:
    (expr,) = [e for title, e in PROMETHEUS_TARGETS if title == "Spans exported unprofiled"]
    window = int(metrics_run.end - metrics_run.start) + 1
    assert metrics_run.query_range('agent_profiler_spans_total{agent_profiler_outcome=~"unprofiled_.*"}') == []
    assert set(metrics_run.finite_values(as_prometheus_query(expr, window))) == {0.0}


def test_spanmetrics_counts_every_span_beside_the_profile_metrics(metrics_run: MetricsRun) -> None:
    prometheus = metrics_run.prometheus
    (profiled,) = prometheus.query('sum(agent_profiler_spans_total{agent_profiler_outcome="profiled"})')
    spans = float(profiled["value"][1])
    assert spans > 0
    # The connector flushes every 15 s (otelcol-jaeger.yaml): every span the agent sent is counted once by
    # it, as each was profiled once by the plugin.
    prometheus.wait_for(
        f'sum(traces_span_metrics_calls_total{{service_name="{DEMO_SERVICE}"}})',
        timeout=45,
        predicate=lambda result: float(result[0]["value"][1]) == spans,
    )
    durations = prometheus.query(
        f'count(traces_span_metrics_duration_milliseconds_bucket{{service_name="{DEMO_SERVICE}"}})'
    )
    assert durations and float(durations[0]["value"][1]) > 0


def test_backend_error_is_raised_for_a_bad_query(metrics_run: MetricsRun) -> None:
    # The checks above would pass vacuously if a malformed query came back as an empty result.
    with pytest.raises(BackendError):
        metrics_run.query_range("sum(")
