"""Cutting OTLP requests in two keeps every item once, in order, under its own resource and scope."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler.service.request_split import halves, leaf_count
from otel_agent_profiler.service.signals import LOGS, TRACES


def _traces() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for service in ("a", "b"):
        resource = request.resource_spans.add(schema_url=f"resource-{service}")
        resource.resource.attributes.add(key="service.name").value.string_value = service
        for scope_name in ("s1", "s2"):
            scope = resource.scope_spans.add(schema_url=f"scope-{scope_name}")
            scope.scope.name = scope_name
            for i in range(3):
                scope.spans.add(name=f"{service}/{scope_name}/{i}")
    return request


def _flat(request: ExportTraceServiceRequest) -> list[tuple[str, str, str, str]]:
    return [
        (r.resource.attributes[0].value.string_value, r.schema_url, s.scope.name + s.schema_url, span.name)
        for r in request.resource_spans
        for s in r.scope_spans
        for span in s.spans
    ]


def test_halves_keep_every_span_once_with_its_resource_and_scope() -> None:
    request = _traces()
    first, second = halves(request, TRACES)
    assert leaf_count(request, TRACES) == 12
    assert len(_flat(first)) == 6 and len(_flat(second)) == 6
    assert _flat(first) + _flat(second) == _flat(request)
    assert first.ByteSize() + second.ByteSize() >= request.ByteSize()  # the resources are repeated, not lost


def test_logs_are_cut_alike() -> None:
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    for i in range(5):
        scope.log_records.add().body.string_value = str(i)
    first, second = halves(request, LOGS)
    bodies = [r.body.string_value for half in (first, second) for r in half.resource_logs[0].scope_logs[0].log_records]
    assert bodies == ["0", "1", "2", "3", "4"]


def test_one_span_cannot_be_cut() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(name="only")
    with pytest.raises(ValueError):
        halves(request, TRACES)
