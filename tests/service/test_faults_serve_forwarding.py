"""``serve`` forwards by bytes and by what the upstream answers, and counts what the upstream refuses.

Companions of test_faults_serve.py (same ``Sender`` and ``sent / delivered / lost`` report). The upstreams are
a real collector with gRPC's 4 MiB request limit (rotel), and small OTLP servers run in this process that
answer as a faulty upstream would: 413 above a size, too slow for the export timeout, a partial success, a
redirect to a sign-in page, 503 with ``Retry-After``. Every scenario checks
``received = forwarded + failed + rejected + held``.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from tests.service.test_faults_serve import Sender, _counts, _report, _request, _span_ids
from tests.support.backends import Rotel, artifact_dir, free_port, wait_until

pytestmark = pytest.mark.faults

#: What a scripted upstream answers to one export: status, headers, body.
Answer = tuple[int, dict[str, str], bytes]


def _llm_request(spans: int, traces: int = 1, payload_bytes: int = 6000) -> ExportTraceServiceRequest:
    """``_request`` with LLM-sized spans: each carries ``payload_bytes`` of prompt text."""
    request = _request(spans, traces)
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.attributes.add(key="gen_ai.input.messages").value.string_value = "x" * payload_bytes
    return request


class ScriptedUpstream:
    """An OTLP/HTTP upstream whose answer to each export is ``answer(request, body)``.

    Records the span ids of every request it answered 200 (less those it said it rejected), the time and
    size of every export, and every GET.
    """

    def __init__(self, answer: Callable[[ExportTraceServiceRequest, bytes], Answer] | None = None) -> None:
        self.answer = answer or (lambda request, body: (200, {}, b""))
        self.port = free_port()
        self.delivered: set[bytes] = set()
        self.stored = 0  # spans in requests answered 200, duplicates included
        self.exports: list[tuple[float, int, int]] = []  # (monotonic time, span count, bytes)
        self.refused_bodies: list[bytes] = []
        self.gets: list[str] = []
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with upstream._lock:
                    upstream.gets.append(self.path)
                self._reply(200, {"Content-Type": "text/html"}, b"<html>sign in</html>")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self._reply(200, {}, b"")
                    return
                request = ExportTraceServiceRequest.FromString(body)
                ids = _span_ids(request)
                with upstream._lock:
                    upstream.exports.append((time.monotonic(), len(ids), len(body)))
                status, headers, answer = upstream.answer(request, body)
                if status == 200:
                    rejected = ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans
                    with upstream._lock:
                        upstream.delivered.update(ids[rejected:])
                        upstream.stored += len(ids) - rejected
                elif status == 413:
                    with upstream._lock:
                        upstream.refused_bodies.append(body)
                self._reply(status, {"Content-Type": "application/x-protobuf", **headers}, answer)

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # serve gave up waiting (its export timeout): the scenario
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedUpstream:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, ids: set[bytes]) -> int:
        with self._lock:
            return len(ids & self.delivered)


@pytest.fixture
def scripted() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream().start()
    yield server
    server.stop()


def _config(url: str, protocol: str = "http", **pipeline: Any) -> ServeConfig:
    pipeline.setdefault("quiet_period_s", 0.1)
    return ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=url,
        upstream_protocol=protocol,
        metrics_interval_s=3600,
        export_timeout_s=5,
        retry_initial_backoff_s=0.05,
        retry_max_backoff_s=0.5,
        shutdown_grace_s=5,
        pipeline=PipelineConfig(**pipeline),
    )


def _assert_identity(counts: dict[str, int]) -> None:
    held = counts["held_spans"] + counts["pending_spans"]
    assert counts["received"] == counts["forwarded"] + counts["failed"] + counts["rejected"] + held, counts


# -- requests bounded in bytes, against a real 4 MiB limit ----------------------------------------------------


@pytest.fixture
def rotel_to_scripted(request: pytest.FixtureRequest, scripted: ScriptedUpstream) -> Iterator[Rotel]:
    """rotel (gRPC receiver, 4 MiB limit) forwarding over HTTP to ``scripted``, which records what arrives."""
    rotel = Rotel(
        artifact_dir("faults", request.node.name),
        exporter_endpoint=scripted.url,
        protocol="http",
        traces_endpoint=f"{scripted.url}/v1/traces",
        metrics_endpoint=f"{scripted.url}/v1/metrics",
    )
    yield rotel
    rotel.stop()


def test_a_trace_larger_than_the_upstreams_grpc_limit_is_split_across_requests(
    scripted: ScriptedUpstream, rotel_to_scripted: Rotel
) -> None:
    rotel = rotel_to_scripted.start()
    # One trace of 800 LLM-sized spans: about 5 MB once enriched, over rotel's 4 MiB, sent to serve in parts.
    parts = [_llm_request(200) for _ in range(4)]
    trace_id = parts[0].resource_spans[0].scope_spans[0].spans[0].trace_id
    for part in parts[1:]:
        for span in part.resource_spans[0].scope_spans[0].spans:
            span.trace_id = trace_id
    with ProfilingService(_config(rotel.grpc_url, "grpc", quiet_period_s=0.3)) as service:
        sender = Sender(service.http_port)
        for part in parts:
            assert sender.send(part) == 200
        wait_until(lambda: scripted.count(sender.accepted) == 800, 30, "the whole trace to reach the upstream")
        wait_until(lambda: _counts(service)["forwarded"] == 800, 10, "serve to count the trace forwarded")
        counts = _counts(service)
        assert counts["failed"] == counts["rejected"] == 0 and counts["traces_profiled"] == 1
        _assert_identity(counts)
    _report("one 5 MB trace to a 4 MiB upstream", 800, scripted.count(sender.accepted), counts["failed"])


def test_a_backlog_of_llm_sized_spans_reaches_an_upstream_that_comes_back(
    request: pytest.FixtureRequest, scripted: ScriptedUpstream
) -> None:
    """README's "upstream killed and restarted" with 6 KB spans: the backlog goes out in requests rotel takes."""
    rotel = Rotel(
        artifact_dir("faults", request.node.name),
        exporter_endpoint=scripted.url,
        protocol="http",
        traces_endpoint=f"{scripted.url}/v1/traces",
        metrics_endpoint=f"{scripted.url}/v1/metrics",
    )
    try:
        with ProfilingService(_config(rotel.grpc_url, "grpc")) as service:  # rotel not started yet: down
            sender = Sender(service.http_port)
            for _ in range(15):
                assert sender.send(_llm_request(100, traces=10)) == 200
            wait_until(lambda: _counts(service)["held_spans"] == 0, 10, "the traces to be profiled")
            time.sleep(1.0)  # the batches wait in the forward queue, to be merged
            rotel.start()
            wait_until(lambda: scripted.count(sender.accepted) == 1500, 30, "the backlog to be delivered")
            wait_until(lambda: _counts(service)["forwarded"] == 1500, 10, "serve to count the backlog forwarded")
            counts = _counts(service)
            assert counts["failed"] == counts["rejected"] == 0
            _assert_identity(counts)
    finally:
        rotel.stop()
    _report("6 KB spans, upstream back after 1 s", 1500, scripted.count(sender.accepted), counts["failed"])


def test_a_request_refused_as_too_large_is_split_and_never_sent_whole_again(scripted: ScriptedUpstream) -> None:
    limit = 200_000  # far below serve's own bound: only the upstream's answer can teach it

    def answer(request: ExportTraceServiceRequest, body: bytes) -> Answer:
        return (413, {}, b"too large") if len(body) > limit else (200, {}, b"")

    scripted.answer = answer
    with ProfilingService(_config(scripted.url)) as service:
        sender = Sender(service.http_port)
        assert sender.send(_llm_request(300, payload_bytes=1000)) == 200  # one trace, 330 KB
        wait_until(lambda: scripted.count(sender.accepted) == 300, 15, "every span to be delivered")
        wait_until(lambda: _counts(service)["forwarded"] == 300, 5, "serve to count them forwarded")
        counts = _counts(service)
        assert counts["failed"] == 0
        _assert_identity(counts)
    refused = scripted.refused_bodies
    # Refused once, then cut to fit under half its size: no request was sent whole again.
    assert len(refused) == 1, [len(body) for body in refused]
    (_, first_count, first_size), *rest = scripted.exports
    assert first_count == 300 and sum(count for _, count, _ in rest) == 300
    assert all(size <= first_size // 2 for _, _, size in rest)
    _report("upstream refuses over 200 KB (413)", 300, scripted.count(sender.accepted), counts["failed"])


def test_a_request_that_keeps_timing_out_is_shrunk_until_the_slow_upstream_takes_it(
    scripted: ScriptedUpstream,
) -> None:
    per_span_s = 0.004

    def answer(request: ExportTraceServiceRequest, body: bytes) -> Answer:
        time.sleep(per_span_s * len(_span_ids(request)))  # 400 spans: 1.6 s, over the 1 s timeout
        return 200, {}, b""

    scripted.answer = answer
    config = _config(scripted.url)
    config.export_timeout_s = 1.0
    with ProfilingService(config) as service:
        sender = Sender(service.http_port)
        assert sender.send(_request(400)) == 200
        wait_until(lambda: _counts(service)["forwarded"] == 400, 20, "the trace to be forwarded")
        counts = _counts(service)
        assert counts["failed"] == 0
        assert scripted.count(sender.accepted) == 400
        _assert_identity(counts)
    # Two timeouts of the whole, then halves: the upstream stored it at most three times over.
    assert scripted.stored <= 3 * 400, scripted.stored
    scenario = f"slow upstream (4 ms a span, 1 s timeout; it stored {scripted.stored} spans)"
    _report(scenario, 400, scripted.count(sender.accepted), counts["failed"])


# -- the upstream's answers -----------------------------------------------------------------------------------


def _reject_all(request: ExportTraceServiceRequest, body: bytes) -> Answer:
    response = ExportTraceServiceResponse()
    response.partial_success.rejected_spans = len(_span_ids(request))
    response.partial_success.error_message = "spans too old"
    return 200, {}, response.SerializeToString()


def _rejecting_all(request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
    """A gRPC upstream's answer: a partial success rejecting every span of the request."""
    return ExportTraceServiceResponse.FromString(_reject_all(request, b"")[2])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_spans_rejected_in_a_partial_success_are_counted_and_logged(
    scripted: ScriptedUpstream, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    scripted.answer = _reject_all
    grpc_upstream = ScriptedGrpcUpstream(_rejecting_all) if protocol == "grpc" else None
    url = grpc_upstream.url if grpc_upstream is not None else scripted.url
    try:
        with caplog.at_level(logging.WARNING), ProfilingService(_config(url, protocol)) as service:
            sender = Sender(service.http_port)
            assert sender.send(_request(100, traces=4)) == 200
            wait_until(lambda: _counts(service)["rejected"] == 100, 10, "the rejection to be counted")
            counts = _counts(service)
            assert counts["forwarded"] == counts["failed"] == 0
            _assert_identity(counts)
            assert service.health()["status"] == "ok"  # the upstream answered: it is not failing
    finally:
        if grpc_upstream is not None:
            grpc_upstream.server.stop(0)
    lines = [r.getMessage() for r in caplog.records if "partial success" in r.getMessage()]
    assert lines and "spans too old" in lines[0] and "rejected" in lines[0]
    assert sum(int(line.split()[0]) for line in lines) == 100
    _report(f"partial success rejecting all ({protocol})", 100, 0, counts["rejected"])


def test_a_redirect_is_not_followed_and_counts_as_not_delivered(
    scripted: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    scripted.answer = lambda request, body: (302, {"Location": "/login"}, b"")
    with caplog.at_level(logging.WARNING), ProfilingService(_config(scripted.url)) as service:
        sender = Sender(service.http_port)
        assert sender.send(_request(100, traces=4)) == 200
        wait_until(lambda: _counts(service)["failed"] == 100, 10, "the spans to be counted as failed")
        counts = _counts(service)
        assert counts["forwarded"] == 0
        _assert_identity(counts)
    assert scripted.gets == []  # the sign-in page was never asked for
    lines = [r.getMessage() for r in caplog.records if "redirect" in r.getMessage()]
    assert lines and "HTTP 302" in lines[0] and "/login" in lines[0]
    _report("upstream redirects to a sign-in page", 100, 0, counts["failed"])


class ScriptedGrpcUpstream:
    """An OTLP/gRPC upstream (grpcio's server) whose handler is ``answer(request, context)``; it records the time
    and span ids of every export that reached the handler, and what it took (answered OK). ``answer`` aborts the
    call to refuse it, or returns the response to send (None: an empty one)."""

    def __init__(
        self, answer: Callable[[ExportTraceServiceRequest, Any], ExportTraceServiceResponse | None], **options: Any
    ) -> None:
        self.answer = answer
        self.calls: list[tuple[float, list[bytes]]] = []
        self.delivered: set[bytes] = set()
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=list(options.items()))

        def export(request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
            ids = _span_ids(request)
            with self._lock:
                self.calls.append((time.monotonic(), ids))
            response = self.answer(request, context)  # aborts the call to refuse it
            with self._lock:
                self.delivered.update(ids)
            return response or ExportTraceServiceResponse()

        handler = grpc.unary_unary_rpc_method_handler(
            export,
            request_deserializer=ExportTraceServiceRequest.FromString,
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}
                ),
            )
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, ids: set[bytes]) -> int:
        with self._lock:
            return len(ids & self.delivered)


def _exhausted(context: Any, retry_after_s: float | None) -> None:
    """Abort the call with RESOURCE_EXHAUSTED, with a RetryInfo when ``retry_after_s`` is given (OTLP throttling)."""
    from google.protobuf.duration_pb2 import Duration
    from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]

    if retry_after_s is not None:
        status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="over the ingest rate")
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=Duration(nanos=int(retry_after_s * 1e9))))
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "over the ingest rate")
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "tenant quota exceeded for the month")


def test_resource_exhausted_with_retry_info_is_throttling_and_retried_after_the_delay() -> None:
    def throttle_the_first(request: ExportTraceServiceRequest, context: Any) -> None:
        if len(upstream.calls) == 1:
            _exhausted(context, retry_after_s=0.8)

    upstream = ScriptedGrpcUpstream(throttle_the_first)
    try:
        with ProfilingService(_config(upstream.url, "grpc")) as service:  # its own backoff starts at 0.05 s
            sender = Sender(service.http_port)
            assert sender.send(_request(100, traces=4)) == 200
            wait_until(lambda: _counts(service)["forwarded"] == 100, 10, "the retry to deliver")
            counts = _counts(service)
            assert counts["failed"] == 0
            _assert_identity(counts)
    finally:
        upstream.server.stop(0)
    assert upstream.count(sender.accepted) == 100
    (first, _), (second, _) = upstream.calls[:2]
    assert second - first >= 0.75, second - first  # the RetryInfo's delay, not the 0.05 s backoff
    _report("RESOURCE_EXHAUSTED with RetryInfo (throttling)", 100, upstream.count(sender.accepted), 0)


def test_resource_exhausted_without_retry_info_or_a_size_is_not_retried_and_counted_as_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = ScriptedGrpcUpstream(lambda request, context: _exhausted(context, retry_after_s=None))
    try:
        with caplog.at_level(logging.WARNING), ProfilingService(_config(upstream.url, "grpc")) as service:
            sender = Sender(service.http_port)
            assert sender.send(_request(100, traces=4)) == 200
            wait_until(lambda: _counts(service)["failed"] == 100, 10, "the spans to be counted as failed")
            time.sleep(0.3)  # time enough for retries at the 0.05 s backoff, were there any
            counts = _counts(service)
            assert counts["forwarded"] == 0
            _assert_identity(counts)
    finally:
        upstream.server.stop(0)
    assert len(upstream.calls) == 1  # sent once: before, it was retried for as long as serve ran
    lines = [r.getMessage() for r in caplog.records if "RESOURCE_EXHAUSTED" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("100 spans not delivered"), lines
    assert "without RetryInfo" in lines[0] and "tenant quota exceeded" in lines[0]
    _report("RESOURCE_EXHAUSTED without RetryInfo (a quota)", 100, 0, counts["failed"])


def test_resource_exhausted_for_the_message_size_from_grpcs_own_limit_is_split() -> None:
    """grpcio's server with a 50 KB receive limit refuses larger requests itself ("Received message larger than
    max"); serve cuts them until they fit."""
    upstream = ScriptedGrpcUpstream(lambda request, context: None, **{"grpc.max_receive_message_length": 50_000})
    try:
        with ProfilingService(_config(upstream.url, "grpc")) as service:
            sender = Sender(service.http_port)
            assert sender.send(_llm_request(60, traces=2, payload_bytes=2000)) == 200  # about 130 KB
            wait_until(lambda: _counts(service)["forwarded"] == 60, 15, "every span to be forwarded")
            counts = _counts(service)
            assert counts["failed"] == 0
            _assert_identity(counts)
            assert service.pipeline.forwarder is not None
            assert service.pipeline.forwarder.max_request_bytes < 130_000 // 2 + 1
    finally:
        upstream.server.stop(0)
    assert upstream.count(sender.accepted) == 60
    _report("gRPC's own 50 KB limit (RESOURCE_EXHAUSTED, message size)", 60, upstream.count(sender.accepted), 0)


def test_retry_after_is_honoured(scripted: ScriptedUpstream) -> None:
    answers = iter([(503, {"Retry-After": "2"}, b"")])
    scripted.answer = lambda request, body: next(answers, (200, {}, b""))
    with ProfilingService(_config(scripted.url)) as service:  # its own backoff starts at 0.05 s
        sender = Sender(service.http_port)
        assert sender.send(_request(10)) == 200
        wait_until(lambda: len(scripted.exports) >= 2, 10, "the retry")
        (first, _, _), (second, _, _) = scripted.exports[:2]
        assert second - first >= 1.9, second - first
        wait_until(lambda: _counts(service)["forwarded"] == 10, 10, "the retry to deliver")
        _assert_identity(_counts(service))
    _report("503 with Retry-After: 2", 10, scripted.count(sender.accepted), 0)
