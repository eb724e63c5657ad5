"""Metrics and logs sent to ``serve`` reach a real rotel upstream unchanged, over gRPC and HTTP (protobuf and
JSON); without an upstream they are accepted and counted; the health checks orchestrators probe."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from otel_agent_profiler.service.self_metrics import register_service_metrics
from tests.support.backends import Rotel, http_exchange, wait_until

METRICS_EXPORT = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
TOKEN = "pass-through-token"


def _metrics(name: str, value: float) -> ExportMetricsServiceRequest:
    """One gauge with two data points (value and value + 1), labelled by ``route``."""
    request = ExportMetricsServiceRequest()
    resource = request.resource_metrics.add()
    attribute = resource.resource.attributes.add(key="service.name")
    attribute.value.string_value = "passthrough-app"
    metric = resource.scope_metrics.add().metrics.add(name=name, unit="ms", description="a test gauge")
    for offset, route in enumerate(("/a", "/b")):
        point = metric.gauge.data_points.add(time_unix_nano=1_760_000_000_000_000_000, as_double=value + offset)
        label = point.attributes.add(key="route")
        label.value.string_value = route
    return request


def _logs(body: str) -> ExportLogsServiceRequest:
    """Three log records; the first carries a trace and span id (hex in OTLP/JSON)."""
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    attribute = resource.resource.attributes.add(key="service.name")
    attribute.value.string_value = "passthrough-app"
    scope = resource.scope_logs.add()
    for i in range(3):
        record = scope.log_records.add(time_unix_nano=1_760_000_000_000_000_000 + i, severity_text="INFO")
        record.body.string_value = f"{body} #{i}"
    scope.log_records[0].trace_id = bytes(range(16))
    scope.log_records[0].span_id = bytes(range(8))
    return request


def _otlp_json(message: Any) -> bytes:
    """OTLP/JSON: protobuf's JSON mapping with ids as hex, as the OTLP specification writes them."""
    document = json_format.MessageToDict(message)
    for resource in document.get("resourceLogs", ()):
        for scope in resource.get("scopeLogs", ()):
            for record in scope.get("logRecords", ()):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return json.dumps(document).encode()


def _post(port: int, path: str, body: bytes, content_type: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers, method="POST")
    status, _, body = http_exchange(request)
    return status, body


def _get(port: int, path: str) -> tuple[int, dict[str, str], Any]:
    status, headers, body = http_exchange(f"http://127.0.0.1:{port}{path}")
    return status, headers, json.loads(body)


def _send_all_ways(service: ProfilingService, tag: str) -> None:
    """Metrics and logs tagged ``tag``: over gRPC, HTTP protobuf and HTTP JSON; each answered OK."""
    with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        channel.unary_unary(METRICS_EXPORT)(_metrics(f"{tag}.grpc", 1.5).SerializeToString(), timeout=10)
        channel.unary_unary(LOGS_EXPORT)(_logs(f"{tag} grpc").SerializeToString(), timeout=10)
    port = service.http_port
    protobuf, as_json = "application/x-protobuf", "application/json"
    assert _post(port, "/v1/metrics", _metrics(f"{tag}.protobuf", 2.5).SerializeToString(), protobuf)[0] == 200
    assert _post(port, "/v1/logs", _logs(f"{tag} protobuf").SerializeToString(), protobuf)[0] == 200
    assert _post(port, "/v1/metrics", _otlp_json(_metrics(f"{tag}.json", 3.5)), as_json) == (200, b"{}")
    assert _post(port, "/v1/logs", _otlp_json(_logs(f"{tag} json")), as_json) == (200, b"{}")


@pytest.fixture
def no_upstream() -> Iterator[ProfilingService]:
    with ProfilingService(ServeConfig(http_port=0, grpc_port=0, pipeline=PipelineConfig(quiet_period_s=0.1))) as svc:
        yield svc


def test_without_an_upstream_metrics_and_logs_are_accepted_and_counted(no_upstream: ProfilingService) -> None:
    _send_all_ways(no_upstream, "alone")
    signals = no_upstream.health()["signals"]
    assert signals["metrics"] == {
        "requests": 3,
        "received": 6,  # two data points a request
        "forwarded": 0,
        "failed": 0,
        "rejected": 0,
        "held": 0,
        "rejected_requests": 0,
    }
    assert signals["logs"]["requests"] == 3 and signals["logs"]["received"] == 9
    status, _, document = _get(no_upstream.http_port, "/health")
    assert status == 200 and document["signals"] == no_upstream.health()["signals"]
    # The same counts as self metrics, for when there is an upstream to export them to.
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider([reader])
    register_service_metrics(provider.get_meter("test"), no_upstream.health)
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        (dict(p.attributes)["agent_profiler.serve.signal"], dict(p.attributes)["agent_profiler.serve.state"]): p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "agent_profiler.serve.passed_through"
        for p in m.data.data_points
    }
    assert points[("metrics", "received")] == 6 and points[("logs", "received")] == 9
    assert points[("logs", "forwarded")] == 0
    provider.shutdown()


def test_malformed_oversized_and_unauthorized_metrics_and_logs_get_the_trace_answers() -> None:
    config = ServeConfig(http_port=0, grpc_port=0, max_request_bytes=2000, bearer_token=TOKEN)
    with ProfilingService(config) as service:
        port = service.http_port
        good = _metrics("m", 1.0).SerializeToString()
        assert _post(port, "/v1/metrics", good, "application/x-protobuf")[0] == 401
        assert _post(port, "/v1/metrics", good, "application/x-protobuf", TOKEN)[0] == 200
        assert _post(port, "/v1/logs", b"\xff\xff\xff", "application/x-protobuf", TOKEN)[0] == 400
        assert _post(port, "/v1/logs", b'{"resourceLogs": 3}', "application/json", TOKEN)[0] == 400
        assert _post(port, "/v1/logs", b"{}", "text/plain", TOKEN)[0] == 415
        assert _post(port, "/v1/logs", b"x" * 3000, "application/x-protobuf", TOKEN)[0] == 413
        with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
            export = channel.unary_unary(METRICS_EXPORT)
            with pytest.raises(grpc.RpcError) as denied:
                export(good, timeout=10)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
            metadata = (("authorization", f"Bearer {TOKEN}"),)
            with pytest.raises(grpc.RpcError) as malformed:
                export(b"\xff\xff\xff", timeout=10, metadata=metadata)
            assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError) as too_large:
                export(b"\x0a" + b"x" * 3000, timeout=10, metadata=metadata)
            assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert service.health()["signals"]["metrics"]["received"] == 2


def test_metrics_and_logs_are_pushed_back_at_the_held_limit() -> None:
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream="http://127.0.0.1:9",  # nothing listens: everything stays held, retried
        upstream_protocol="http",
        shutdown_grace_s=0.5,
        metrics_interval_s=3600,
        pipeline=PipelineConfig(max_pending_spans=4),
    )
    service = ProfilingService(config).start()
    try:
        port = service.http_port
        body = _metrics("m", 1.0).SerializeToString()
        assert _post(port, "/v1/metrics", body, "application/x-protobuf")[0] == 200
        assert _post(port, "/v1/metrics", body, "application/x-protobuf")[0] == 200  # 4 held: at the limit
        status, headers, document = _get(port, "/health/ready")
        assert status == 503 and headers["Retry-After"] == "1" and "metrics" in document["message"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/metrics", data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        with refused.value:
            assert refused.value.code == 503 and refused.value.headers["Retry-After"] == "1"
        with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
            with pytest.raises(grpc.RpcError) as unavailable:
                channel.unary_unary(METRICS_EXPORT)(body, timeout=10)
            assert unavailable.value.code() == grpc.StatusCode.UNAVAILABLE
        assert _post(port, "/v1/logs", _logs("x").SerializeToString(), "application/x-protobuf")[0] == 200
    finally:
        service.stop()
    metrics = service.health()["signals"]["metrics"]
    assert metrics["received"] == 4 and metrics["failed"] == 4 and metrics["held"] == 0
    assert metrics["rejected_requests"] == 2


def test_health_live_and_ready(no_upstream: ProfilingService) -> None:
    assert _get(no_upstream.http_port, "/health/live")[::2] == (200, {"status": "live"})
    assert _get(no_upstream.http_port, "/health/ready")[::2] == (200, {"status": "ready"})


def test_the_kubernetes_probes_ask_paths_serve_answers(no_upstream: ProfilingService) -> None:
    from tests.project.test_deploy import container

    probes = container("agent-profiler")
    for probe in ("livenessProbe", "readinessProbe"):
        path = probes[probe]["httpGet"]["path"]
        assert _get(no_upstream.http_port, path)[0] == 200, (probe, path)


def test_health_checks_need_no_token() -> None:
    with ProfilingService(ServeConfig(http_port=0, grpc_port=0, bearer_token=TOKEN)) as service:
        for path in ("/health", "/health/live", "/health/ready"):
            assert _get(service.http_port, path)[0] == 200
        assert _get(service.http_port, "/profiles")[0] == 401


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_metrics_and_logs_reach_rotel_unchanged(rotel_factory: Callable[..., Rotel], protocol: str) -> None:
    upstream = rotel_factory(extra_args=["--debug-log", "logs"])
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.grpc_url if protocol == "grpc" else upstream.http_url,
        upstream_protocol=protocol,
        metrics_interval_s=3600,  # serve's own metrics stay out of the way until it stops
    )
    with ProfilingService(config) as service:
        _send_all_ways(service, f"via-{protocol}")
        wait_until(
            lambda: (
                service.health()["signals"]["logs"]["forwarded"] == 9
                and service.health()["signals"]["metrics"]["forwarded"] == 6
            ),
            20,
            "serve to forward everything",
        )
        names = {f"via-{protocol}.{way}": 1.5 + i for i, way in enumerate(("grpc", "protobuf", "json"))}
        got = upstream.wait_for_metrics(lambda ms: {m.name for m in ms} >= set(names), 20)
        for name, value in names.items():
            metric = next(m for m in got if m.name == name)
            assert metric.unit == "ms" and metric.description == "a test gauge" and metric.data_type == "Gauge"
            assert metric.resource["service.name"] == "passthrough-app"
            points = {p.attributes["route"]: p.values["Value"] for p in metric.data_points}
            assert points == {"/a": value, "/b": value + 1}
        text = upstream.wait_for_text(f"via-{protocol} json #2", 20)
        for way in ("grpc", "protobuf", "json"):
            for i in range(3):
                assert f"via-{protocol} {way} #{i}" in text
        assert "000102030405060708090a0b0c0d0e0f" in text  # the trace id a JSON log record carried as hex
        assert service.health()["signals"]["logs"]["failed"] == 0
