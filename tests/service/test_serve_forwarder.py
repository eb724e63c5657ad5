"""The forwarder's retries (until delivered or rejected for good) and the upstream URL handling, with a scripted
exporter."""

from __future__ import annotations

import time
import urllib.error
from email.message import Message

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler.service.forwarder import Forwarder, grpc_target, http_traces_url, retryable


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
