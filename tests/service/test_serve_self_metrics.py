"""serve's own counts as metrics, exported upstream with the profile metrics."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from otel_agent_profiler.service.self_metrics import SPAN_STATES, register_service_metrics
from tests.support.backends import Rotel


def _points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, object], ...], int]]:
    found: dict[str, dict[tuple[tuple[str, object], ...], int]] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, {})[tuple(sorted((point.attributes or {}).items()))] = point.value
    return found


def test_the_health_counts_are_observed_as_metrics() -> None:
    health = {
        "status": "ok",
        "counts": {
            "received": 12,
            "profiled": 9,
            "forwarded": 8,
            "late": 1,
            "over_caps": 2,
            "failed": 1,
            "rejected": 2,
            "invalid": 0,
            "rejected_requests": 3,
            "held_spans": 4,
            "pending_spans": 5,
        },
    }
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    register_service_metrics(provider.get_meter("test"), lambda: health)
    points = _points(reader)
    spans = {
        dict(key)["agent_profiler.serve.state"]: value for key, value in points["agent_profiler.serve.spans"].items()
    }
    assert spans == {state: health["counts"][state] for state in SPAN_STATES}  # type: ignore[index]
    assert points["agent_profiler.serve.rejected_requests"] == {(): 3}
    held = {dict(k)["agent_profiler.serve.state"]: v for k, v in points["agent_profiler.serve.held_spans"].items()}
    assert held == {"assembling": 4, "forwarding": 5}
    provider.shutdown()


@pytest.mark.e2e
def test_serve_exports_its_counts_upstream(rotel_factory: Callable[..., Rotel]) -> None:
    upstream = rotel_factory()
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.grpc_url,
        metrics_interval_s=0.5,
        pipeline=PipelineConfig(quiet_period_s=0.3),
    )
    service = ProfilingService(config).start()
    try:
        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True))
        )
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("invoke_agent a"), tracer.start_as_current_span("execute_tool t"):
            pass
        provider.shutdown()

        def forwarded(metrics: list) -> bool:  # type: ignore[type-arg]
            for metric in metrics:
                if metric.name == "agent_profiler.serve.spans":
                    for point in metric.data_points:
                        if point.attributes.get("agent_profiler.serve.state") == "forwarded":
                            return point.values.get("Value") == 2
            return False

        upstream.wait_for_metrics(
            lambda ms: forwarded([m for m in ms if m.name == "agent_profiler.serve.spans"][-1:]), 20
        )
    finally:
        service.stop()
