"""serve pushes back (retryable status) before what it holds passes its caps, and never takes part of a request."""

from __future__ import annotations

import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler.errors import Overloaded
from otel_agent_profiler.service.pipeline import Pipeline, PipelineConfig


def _request(spans: int, trace: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope.spans.add(name=f"s{i}", start_time_unix_nano=1, end_time_unix_nano=2)
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = (trace * 1000 + i + 1).to_bytes(8, "big")
    return request


def test_spans_assembling_count_against_max_pending_spans() -> None:
    pipeline = Pipeline(PipelineConfig(quiet_period_s=60, max_pending_spans=100), None)
    try:
        pipeline.receive(_request(60, 1))
        assert not pipeline.overloaded()
        pipeline.receive(_request(60, 2))  # checked before taking: 60 held, under the cap
        assert pipeline.overloaded()  # 120 held: over the cap by less than one request
        with pytest.raises(Overloaded):
            pipeline.receive(_request(1, 3))
        counts = pipeline.health()["counts"]
        assert counts["received"] == 120 and counts["held_spans"] == 120 and counts["rejected_requests"] == 1
    finally:
        pipeline.stop()


def test_the_memory_limit_counts_the_serialized_bytes_held() -> None:
    request = _request(10, 1)
    pipeline = Pipeline(PipelineConfig(quiet_period_s=60, max_held_bytes=request.ByteSize() + 1), None)
    try:
        pipeline.receive(request)
        held_bytes = pipeline.health()["counts"]["held_bytes"]
        assert request.ByteSize() - 10 < held_bytes <= request.ByteSize()
        assert not pipeline.overloaded()
        pipeline.receive(_request(10, 2))
        with pytest.raises(Overloaded):
            pipeline.receive(_request(10, 3))
    finally:
        pipeline.stop()


def test_what_is_profiled_without_an_upstream_is_no_longer_held() -> None:
    pipeline = Pipeline(PipelineConfig(quiet_period_s=0, max_pending_spans=10), None)
    try:
        for trace in range(1, 6):
            pipeline.receive(_request(8, trace))  # 8 held, then profiled: never at the cap of 10 for long
            deadline = time.monotonic() + 5
            while pipeline.overloaded():
                assert time.monotonic() < deadline
                time.sleep(0.01)
    finally:
        pipeline.stop()
    counts = pipeline.health()["counts"]
    assert counts["received"] == counts["profiled"] == 40
    assert counts["held_bytes"] == counts["held_spans"] == counts["pending_spans"] == 0
