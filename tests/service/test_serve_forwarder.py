"""The forwarder's retries (until delivered or rejected for good) and the upstream URL handling, with a scripted
exporter."""

from __future__ import annotations

import email.utils
import time
import urllib.error
from email.message import Message

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler.service.forwarder import (
    MAX_RETRY_AFTER_S,
    Forwarder,
    grpc_target,
    http_traces_url,
    retry_after_s,
    retryable,
    too_large,
)


def _request(spans: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        scope.spans.add().name = f"s{i}"
    return request


class ScriptedExporter:
    """Raises the given exceptions in turn, then succeeds."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0
        self.closed = False

    def export(self, request: ExportTraceServiceRequest) -> None:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)

    def close(self) -> None:
        self.closed = True


def _wait(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_retries_retryable_failures_then_forwards() -> None:
    exporter = ScriptedExporter(ConnectionRefusedError(), ConnectionRefusedError())
    forwarder = Forwarder(exporter, initial_backoff_s=0.01)
    forwarder.submit(_request(3))
    _wait(lambda: forwarder.forwarded == 3)
    assert exporter.calls == 3 and forwarder.failed == 0 and not forwarder.failing
    assert forwarder.pending_spans == 0
    forwarder.close(1)
    assert exporter.closed


def test_retryable_failures_are_retried_for_as_long_as_the_upstream_fails() -> None:
    exporter = ScriptedExporter(*[ConnectionRefusedError()] * 30)
    forwarder = Forwarder(exporter, initial_backoff_s=0.001, max_backoff_s=0.01)
    forwarder.submit(_request(2))
    forwarder.submit(_request(1))  # waits behind the first batch
    _wait(lambda: forwarder.forwarded == 3)
    assert exporter.calls in (31, 32)  # 32 when the second batch came too late to be merged with the first
    assert forwarder.failed == 0 and not forwarder.failing
    forwarder.close(1)


def test_close_counts_what_the_grace_period_could_not_deliver() -> None:
    exporter = ScriptedExporter(*[ConnectionRefusedError()] * 1000)
    forwarder = Forwarder(exporter, initial_backoff_s=0.01, max_backoff_s=0.01)
    forwarder.submit(_request(2))
    forwarder.submit(_request(3))
    started = time.monotonic()
    assert forwarder.close(0.2) == 5
    assert 0.2 <= time.monotonic() - started < 2
    assert forwarder.failed == 5 and forwarder.forwarded == 0 and forwarder.pending_spans == 0


def test_non_retryable_failure_is_not_retried() -> None:
    bad_request = urllib.error.HTTPError("http://x/v1/traces", 400, "Bad Request", Message(), None)
    exporter = ScriptedExporter(bad_request)
    forwarder = Forwarder(exporter, initial_backoff_s=0.01)
    forwarder.submit(_request(1))
    _wait(lambda: forwarder.failed == 1)
    assert exporter.calls == 1
    forwarder.close(1)


def test_close_sends_what_is_queued() -> None:
    exporter = ScriptedExporter()
    forwarder = Forwarder(exporter)
    for _ in range(5):
        forwarder.submit(_request(2))
    forwarder.submit(_request(0))  # empty batches are not sent
    forwarder.close(5)
    assert forwarder.forwarded == 10 and 1 <= exporter.calls <= 5  # batches waiting are sent together


def test_retryable_classification() -> None:
    assert retryable(ConnectionRefusedError())
    assert retryable(urllib.error.HTTPError("u", 503, "", Message(), None))
    assert not retryable(urllib.error.HTTPError("u", 400, "", Message(), None))
    assert not retryable(ValueError())


def test_upstream_urls() -> None:
    assert grpc_target("http://collector:4317") == ("collector:4317", False)
    assert grpc_target("https://collector:4317") == ("collector:4317", True)
    assert grpc_target("collector:4317") == ("collector:4317", False)
    assert http_traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert http_traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert http_traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
    with pytest.raises(ValueError):
        http_traces_url("ftp://collector")
    with pytest.raises(ValueError):
        grpc_target("http://collector")


def test_batches_waiting_for_a_failing_upstream_are_sent_together() -> None:
    exporter = ScriptedExporter(*[ConnectionRefusedError()] * 5)
    forwarder = Forwarder(exporter, initial_backoff_s=0.05, max_backoff_s=0.05)
    for _ in range(40):
        forwarder.submit(_request(50))
    _wait(lambda: forwarder.forwarded == 2000)
    # 5 failures of the first batch, then 2 requests of 1000 spans, or 3 if the first was taken alone.
    assert exporter.calls <= 5 + 3
    forwarder.close(1)


def _http_error(code: int, **headers: str) -> urllib.error.HTTPError:
    message = Message()
    for key, value in headers.items():
        message[key] = value
    return urllib.error.HTTPError("u", code, "", message, None)


def test_retry_after_in_seconds_or_as_a_date_and_bounded() -> None:
    assert retry_after_s(_http_error(503, **{"Retry-After": "7"})) == 7.0
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_s(_http_error(429, **{"Retry-After": date}), now=1_000_000.0) == 30.0
    assert retry_after_s(_http_error(503, **{"Retry-After": "86400"})) == MAX_RETRY_AFTER_S
    assert retry_after_s(_http_error(503, **{"Retry-After": "soon"})) is None
    assert retry_after_s(_http_error(503)) is None
    assert retry_after_s(ConnectionRefusedError()) is None


def test_what_counts_as_too_large_and_as_a_redirect() -> None:
    assert too_large(_http_error(413))
    assert not too_large(_http_error(503)) and not too_large(ConnectionRefusedError())
    assert not retryable(_http_error(302, Location="/login"))


def test_a_request_over_the_byte_bound_is_sent_in_parts_under_it() -> None:
    exporter = RecordingExporter()
    request = _request(40)
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.attributes.add(key="payload").value.string_value = "x" * 1000
    forwarder = Forwarder(exporter, max_request_bytes=10_000)
    forwarder.submit(request)
    forwarder.close(5)
    assert forwarder.forwarded == 40 and sum(count for count, _ in exporter.sent) == 40
    assert len(exporter.sent) >= 4 and all(size <= 10_000 for _, size in exporter.sent)


def test_queued_batches_merge_up_to_the_byte_bound() -> None:
    exporter = RecordingExporter(ConnectionRefusedError())
    forwarder = Forwarder(exporter, initial_backoff_s=0.2, max_request_bytes=5_000)
    for _ in range(20):
        request = _request(2)
        for span in request.resource_spans[0].scope_spans[0].spans:
            span.attributes.add(key="payload").value.string_value = "x" * 400
        forwarder.submit(request)
    _wait(lambda: forwarder.forwarded == 40)
    delivered = exporter.sent[1:]  # the first attempt failed while the rest queued
    assert all(size <= 5_000 for _, size in delivered) and len(delivered) < 20
    forwarder.close(1)


class RecordingExporter(ScriptedExporter):
    """Records (span count, serialized bytes) of every request it delivered or failed."""

    def __init__(self, *failures: BaseException) -> None:
        super().__init__(*failures)
        self.sent: list[tuple[int, int]] = []

    def export(self, request: ExportTraceServiceRequest) -> None:
        self.sent.append((sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans), request.ByteSize()))
        super().export(request)


def test_grpc_retry_info_is_honoured() -> None:
    """A real gRPC upstream answers UNAVAILABLE with a RetryInfo of 1.5 s, then OK."""
    from concurrent import futures

    import grpc  # type: ignore[import-untyped]
    from google.protobuf.duration_pb2 import Duration
    from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    from otel_agent_profiler.service.forwarder import GrpcExporter

    calls: list[float] = []

    def export(request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        calls.append(time.monotonic())
        if len(calls) == 1:
            status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="busy")
            status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=Duration(seconds=1, nanos=500_000_000)))
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNAVAILABLE, "busy")
        return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    handler = grpc.unary_unary_rpc_method_handler(
        export,
        request_deserializer=ExportTraceServiceRequest.FromString,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    service = "opentelemetry.proto.collector.trace.v1.TraceService"
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        forwarder = Forwarder(GrpcExporter(f"127.0.0.1:{port}", 5.0), initial_backoff_s=0.01)
        forwarder.submit(_request(3))
        _wait(lambda: forwarder.forwarded == 3)
        forwarder.close(1)
    finally:
        server.stop(0)
    assert len(calls) == 2 and calls[1] - calls[0] >= 1.4, calls
