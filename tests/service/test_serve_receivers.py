"""The service's receivers in-process (no upstream): statuses for good, malformed and oversized
requests over OTLP/HTTP and OTLP/gRPC, and the /health and /profiles endpoints."""

from __future__ import annotations

import gzip
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from tests.support.backends import http_exchange, http_get

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LIMIT = 20_000


def _spans(count: int = 3) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "receiver-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(count - 1):
            with tracer.start_as_current_span(
                f"execute_tool t{i}", attributes={"gen_ai.operation.name": "execute_tool"}
            ):
                time.sleep(0.001)
    provider.shutdown()
    return list(exporter.get_finished_spans())


@pytest.fixture
def service() -> Iterator[ProfilingService]:
    config = ServeConfig(http_port=0, grpc_port=0, max_request_bytes=LIMIT, pipeline=PipelineConfig(quiet_period_s=0.1))
    with ProfilingService(config) as svc:
        yield svc


def _post(service: ProfilingService, body: bytes, content_type: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{service.http_port}/v1/traces",
        data=body,
        headers={"Content-Type": content_type},
        method="POST",
    )
    return http_exchange(request)


def _grpc_export(service: ProfilingService, body: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        try:
            ExportTraceServiceResponse.FromString(call(body, timeout=10))
        except grpc.RpcError as err:
            return err.code()
    return grpc.StatusCode.OK


def _get_json(service: ProfilingService, path: str) -> tuple[int, Any]:
    status, body = http_get(f"http://127.0.0.1:{service.http_port}{path}")
    return status, json.loads(body)


def _wait_profiled(service: ProfilingService, count: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        _, health = _get_json(service, "/health")
        if health["counts"]["profiled"] >= count or time.monotonic() > deadline:
            return health  # type: ignore[no-any-return]
        time.sleep(0.05)


def test_http_protobuf_and_grpc_requests_are_profiled(service: ProfilingService) -> None:
    spans = _spans()
    status, headers, body = _post(service, encode_spans(spans).SerializeToString(), "application/x-protobuf")
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    ExportTraceServiceResponse.FromString(body)
    other = _spans(2)
    assert _grpc_export(service, encode_spans(other).SerializeToString()) == grpc.StatusCode.OK
    health = _wait_profiled(service, 5)
    assert health["status"] == "ok"
    counts = health["counts"]
    assert counts["received"] == 5 and counts["profiled"] == 5
    assert counts["late"] == counts["over_caps"] == counts["failed"] == counts["forwarded"] == 0

    trace_id = f"{spans[0].context.trace_id:032x}"
    status, profile = _get_json(service, f"/profiles/{trace_id}")
    assert status == 200
    assert profile["trace_id"] == trace_id and profile["span_count"] == 3
    assert profile["categories"]["tool"]["count"] == 2
    status, summary = _get_json(service, "/profiles")
    assert status == 200 and summary["trace_count"] == 2 and summary["span_count"] == 5
    assert {t["trace_id"] for t in summary["traces"]} == {trace_id, f"{other[0].context.trace_id:032x}"}
    assert _get_json(service, "/profiles/" + "0" * 31 + "1")[0] == 404
    assert _get_json(service, "/nothing")[0] == 404

    # A span of a profiled trace arriving later is late, forwarded unprofiled.
    assert _grpc_export(service, encode_spans(spans[:1]).SerializeToString()) == grpc.StatusCode.OK
    assert _get_json(service, "/health")[1]["counts"]["late"] == 1


def test_http_json_request_is_accepted(service: ProfilingService) -> None:
    spans = _spans()
    document: dict[str, Any] = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "traceId": f"{s.context.trace_id:032x}",
                                "spanId": f"{s.context.span_id:016x}",
                                "parentSpanId": f"{s.parent.span_id:016x}" if s.parent else "",
                                "name": s.name,
                                "kind": 1,
                                "startTimeUnixNano": str(s.start_time),
                                "endTimeUnixNano": str(s.end_time),
                                "unknownField": 1,
                            }
                            for s in spans
                        ],
                    }
                ],
            }
        ]
    }
    status, headers, body = _post(service, json.dumps(document).encode(), "application/json; charset=utf-8")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {}
    assert _wait_profiled(service, 3)["counts"]["profiled"] == 3
    status, profile = _get_json(service, f"/profiles/{spans[0].context.trace_id:032x}")
    assert status == 200 and profile["span_count"] == 3


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\xff\xff\xff\xff", "application/x-protobuf"),
        (b"{not json", "application/json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}', "application/json"),
    ],
)
def test_malformed_http_requests_get_400_and_are_logged_without_payload(
    service: ProfilingService, body: bytes, content_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, _, answer = _post(service, body, content_type)
    assert status == 400
    assert json.loads(answer)["code"] == 400
    assert "malformed OTLP/HTTP request" in caplog.text
    assert "xyz" not in caplog.text and "not json" not in caplog.text
    assert _get_json(service, "/health")[1]["counts"]["received"] == 0


def test_gzip_bodies_are_accepted_and_their_decompressed_size_limited(service: ProfilingService) -> None:
    small = encode_spans(_spans()).SerializeToString()
    big = encode_spans(_spans(200)).SerializeToString()
    assert len(gzip.compress(big)) < LIMIT < len(big)
    for body, expected in ((small, 200), (big, 413), (b"not gzip", 400)):
        request = urllib.request.Request(
            f"http://127.0.0.1:{service.http_port}/v1/traces",
            data=gzip.compress(body) if body != b"not gzip" else body,
            headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
            method="POST",
        )
        assert http_exchange(request)[0] == expected
    assert _wait_profiled(service, 3)["counts"]["received"] == 3


def test_unsupported_content_type_gets_415(service: ProfilingService) -> None:
    assert _post(service, b"x", "text/plain")[0] == 415


def test_oversized_requests_get_413_and_resource_exhausted(service: ProfilingService) -> None:
    request = encode_spans(_spans(200))
    body = request.SerializeToString()
    assert len(body) > LIMIT
    assert _post(service, body, "application/x-protobuf")[0] == 413
    assert _grpc_export(service, body) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # The service still works afterwards.
    assert _grpc_export(service, encode_spans(_spans()).SerializeToString()) == grpc.StatusCode.OK


def test_malformed_grpc_request_gets_invalid_argument(
    service: ProfilingService, caplog: pytest.LogCaptureFixture
) -> None:
    assert _grpc_export(service, b"\xff\xff\xff\xff") == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed OTLP/gRPC request" in caplog.text
    assert _grpc_export(service, ExportTraceServiceRequest().SerializeToString()) == grpc.StatusCode.OK
