"""``serve`` forwarding to an upstream that wants credentials: mutual TLS with a private CA, a token and a
tenant header, gzip; over gRPC and HTTP, for spans, metrics passed through, logs and the profile metrics;
the headers from the OpenTelemetry variables per signal; and secrets in no log line and no ``/health``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler import cli
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.forwarder import make_exporter
from otel_agent_profiler.service.pipeline import PipelineConfig
from otel_agent_profiler.service.signals import LOGS, METRICS, TRACES
from otel_agent_profiler.service.upstream_connection import UpstreamConnection, UpstreamTls
from tests.support.authenticated_upstream import AuthenticatedUpstream, Pki, make_pki
from tests.support.backends import free_ports, http_exchange, wait_until

TOKEN = "Bearer upstream-s3cret-9f8e7d"
TENANT = "tenant-42"
SPANS = 4


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def upstream(pki: Pki) -> Iterator[AuthenticatedUpstream]:
    with AuthenticatedUpstream(pki, TOKEN, {"x-scope-orgid": TENANT}) as server:
        yield server


@pytest.fixture(autouse=True)
def no_exporter_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_EXPORTER_OTLP_"):
            monkeypatch.delenv(name)


def _trace(trace_byte: int = 1) -> ExportTraceServiceRequest:
    """One trace: an agent span and ``SPANS - 1`` tool spans under it."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name").value.string_value = "auth-test"
    scope = resource.scope_spans.add()
    trace_id = bytes([trace_byte]) * 16
    root = scope.spans.add(name="invoke_agent a", trace_id=trace_id, span_id=b"\x01" * 8)
    root.start_time_unix_nano, root.end_time_unix_nano = 1_000_000_000, 5_000_000_000
    for i in range(SPANS - 1):
        span = scope.spans.add(name=f"execute_tool t{i}", trace_id=trace_id, span_id=bytes([2 + i]) * 8)
        span.parent_span_id = root.span_id
        span.start_time_unix_nano, span.end_time_unix_nano = 1_000_000_000 + i, 2_000_000_000 + i
    return request


def _metrics() -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name="app.queue_depth")
    metric.gauge.data_points.add(time_unix_nano=1, as_double=3.0)
    return request


def _logs() -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add().log_records.add(time_unix_nano=1).body.string_value = "hello"
    return request


def _post(port: int, path: str, message: Any) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=message.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    return http_exchange(request)[0]


def _forward_everything(config: ServeConfig, upstream: AuthenticatedUpstream) -> dict[str, Any]:
    """Run ``serve`` with ``config`` until the upstream has the spans sent to it; its health at stop."""
    service = ProfilingService(config).start()
    try:
        _send_everything(service.http_port)
        wait_until(lambda: upstream.items(TRACES) == SPANS, 10, "the spans upstream")
    finally:
        service.stop()
    return service.health()


def _send_everything(http_port: int) -> None:
    assert _post(http_port, TRACES.http_path, _trace()) == 200
    assert _post(http_port, METRICS.http_path, _metrics()) == 200
    assert _post(http_port, LOGS.http_path, _logs()) == 200


def _profile_metric_names(upstream: AuthenticatedUpstream) -> set[str]:
    return {
        metric.name
        for received in upstream.received
        if received.signal is METRICS
        for resource in received.request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith("agent_profiler.")
    }


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_every_signal_reaches_an_upstream_that_requires_mutual_tls_and_a_token(
    protocol: str, upstream: AuthenticatedUpstream, pki: Pki
) -> None:
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.grpc_url if protocol == "grpc" else upstream.http_url,
        upstream_protocol=protocol,
        upstream_headers=(("authorization", TOKEN), ("x-scope-orgid", TENANT)),
        upstream_compression="gzip",
        upstream_ca=str(pki.ca),
        upstream_client_cert=str(pki.client_cert),
        upstream_client_key=str(pki.client_key),
        metrics_interval_s=60,  # the profile metrics go out once, at stop
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    counts = _forward_everything(config, upstream)
    assert counts["counts"]["forwarded"] == SPANS and counts["counts"]["failed"] == 0
    assert counts["signals"]["metrics"]["forwarded"] == 1 and counts["signals"]["logs"]["forwarded"] == 1
    assert upstream.items(LOGS) == 1 and upstream.refused == 0
    # The profile metrics (the SDK's exporter) went through the same TLS with the same headers.
    assert "agent_profiler.trace.duration" in _profile_metric_names(upstream)
    for headers in upstream.headers_seen():
        assert headers["authorization"] == TOKEN and headers["x-scope-orgid"] == TENANT
    if protocol == "http":
        # Our exporters and the SDK's both compressed their requests.
        assert {headers.get("content-encoding") for headers in upstream.headers_seen()} == {"gzip"}


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_without_the_client_certificate_or_the_token_nothing_is_taken(
    protocol: str, upstream: AuthenticatedUpstream, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    url = upstream.grpc_url if protocol == "grpc" else upstream.http_url
    caplog.set_level(logging.DEBUG)
    # The right token without the client certificate: the TLS handshake fails, and serve keeps retrying.
    no_cert = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=url,
        upstream_protocol=protocol,
        upstream_headers=(("authorization", TOKEN), ("x-scope-orgid", TENANT)),
        upstream_ca=str(pki.ca),
        shutdown_grace_s=0.5,
        retry_initial_backoff_s=0.05,
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    service = ProfilingService(no_cert).start()
    try:
        assert _post(service.http_port, TRACES.http_path, _trace()) == 200
        wait_until(lambda: service.pipeline.forwarder and service.pipeline.forwarder.failing, 10, "a failing upstream")
    finally:
        service.stop()
    assert service.health()["counts"]["failed"] == SPANS and upstream.items(TRACES) == 0
    # The log line has what the connection said. Python's TLS names the refused certificate, and the line says
    # what to check; gRPC's client says only "Socket closed" after this server's refusal (against the real
    # Collector it says more, see tests/backends/test_serve_to_authenticated_collector.py).
    if protocol == "http":
        assert "the TLS connection failed: check the upstream's CA and, if it asks for one, the client certificate" in (
            caplog.text
        )
    else:
        assert "upstream failed (gRPC UNAVAILABLE: failed to connect to all addresses" in caplog.text
    caplog.clear()
    # The client certificate with a wrong token: refused for good (401 / UNAUTHENTICATED), counted, logged.
    wrong = "Bearer not-the-right-one-5a6b"
    wrong_token = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=url,
        upstream_protocol=protocol,
        upstream_headers=(("authorization", wrong), ("x-scope-orgid", TENANT)),
        upstream_ca=str(pki.ca),
        upstream_client_cert=str(pki.client_cert),
        upstream_client_key=str(pki.client_key),
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    service = ProfilingService(wrong_token).start()
    try:
        assert _post(service.http_port, TRACES.http_path, _trace()) == 200
        wait_until(lambda: service.health()["counts"]["failed"] == SPANS, 10, "the spans counted as failed")
    finally:
        service.stop()
    assert upstream.items(TRACES) == 0 and upstream.refused >= 1
    # With the upstream's own words: the status's reason, or the gRPC status message.
    refused = "HTTP 401 Unauthorized" if protocol == "http" else "gRPC UNAUTHENTICATED: missing or wrong credentials"
    assert f"{SPANS} spans not delivered: the upstream rejected them ({refused})" in caplog.text
    assert wrong not in caplog.text and "not-the-right-one" not in caplog.text


def test_headers_come_from_each_signals_variable_before_the_generic_one(
    upstream: AuthenticatedUpstream, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Traces and metrics carry their own variable's (right) token; logs fall back to the generic (wrong) one."""
    right = "authorization=Bearer%20upstream-s3cret-9f8e7d,x-scope-orgid=tenant-42"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20generic,x-scope-orgid=tenant-42")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", right)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", right)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.http_url,
        upstream_protocol="http",
        upstream_ca=str(pki.ca),
        upstream_client_cert=str(pki.client_cert),
        upstream_client_key=str(pki.client_key),
        metrics_interval_s=60,
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    service = ProfilingService(config).start()
    try:
        _send_everything(service.http_port)
        wait_until(lambda: service.health()["signals"]["logs"]["failed"] == 1, 10, "the logs refused")
        wait_until(lambda: upstream.items(TRACES) == SPANS, 10, "the spans upstream")
    finally:
        service.stop()
    assert upstream.items(METRICS) >= 1 and upstream.items(LOGS) == 0
    assert service.health()["counts"]["forwarded"] == SPANS
    assert {headers.get("content-encoding") for headers in upstream.headers_seen()} == {"gzip"}


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Another CA and certificates: the upstream trusts none of them, and serve must not trust its certificate."""
    return make_pki(tmp_path_factory.mktemp("other-pki"))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_tls_files_come_from_each_signals_variable_before_the_generic_one(
    protocol: str, upstream: AuthenticatedUpstream, pki: Pki, other_pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only variables, as an SDK-configured environment has them: the generic CA is another CA's, so only the
    signals whose own variable names the right CA get through; the client certificate is the generic one."""
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20upstream-s3cret-9f8e7d,x-scope-orgid=tenant-42"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(other_pki.ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", str(pki.ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", str(pki.ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", str(pki.client_cert))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", str(pki.client_key))
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.grpc_url if protocol == "grpc" else upstream.http_url,
        upstream_protocol=protocol,
        metrics_interval_s=60,
        shutdown_grace_s=1,
        retry_initial_backoff_s=0.05,
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    service = ProfilingService(config).start()
    try:
        _send_everything(service.http_port)
        wait_until(lambda: upstream.items(TRACES) == SPANS, 10, "the spans upstream")
        wait_until(lambda: upstream.items(METRICS) == 1, 10, "the metrics passed through")
        logs = service.relays[LOGS.name].forwarder
        wait_until(lambda: logs is not None and logs.failing, 10, "the logs' TLS handshake to fail")
    finally:
        service.stop()
    health = service.health()
    assert health["counts"]["forwarded"] == SPANS and health["counts"]["failed"] == 0
    # The logs met the upstream's certificate with the other CA: never taken, counted as not delivered.
    assert upstream.items(LOGS) == 0 and health["signals"]["logs"]["failed"] == 1
    assert "agent_profiler.trace.duration" in _profile_metric_names(upstream)  # the SDK's exporter, same files
    assert upstream.refused == 0  # every request that got through the handshake carried the right token
    if protocol == "http":
        assert {headers.get("content-encoding") for headers in upstream.headers_seen()} == {"gzip"}


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_tls_options_beat_the_variables(
    protocol: str, upstream: AuthenticatedUpstream, pki: Pki, other_pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    for signal_part in ("", "TRACES_", "METRICS_", "LOGS_"):  # every variable names the other CA's files
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal_part}CERTIFICATE", str(other_pki.ca))
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal_part}CLIENT_CERTIFICATE", str(other_pki.client_cert))
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal_part}CLIENT_KEY", str(other_pki.client_key))
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=upstream.grpc_url if protocol == "grpc" else upstream.http_url,
        upstream_protocol=protocol,
        upstream_headers=(("authorization", TOKEN), ("x-scope-orgid", TENANT)),
        upstream_ca=str(pki.ca),
        upstream_client_cert=str(pki.client_cert),
        upstream_client_key=str(pki.client_key),
        metrics_interval_s=60,
        pipeline=PipelineConfig(quiet_period_s=0.05),
    )
    health = _forward_everything(config, upstream)
    assert health["counts"]["forwarded"] == SPANS and health["counts"]["failed"] == 0
    assert health["signals"]["metrics"]["forwarded"] == 1 and health["signals"]["logs"]["forwarded"] == 1
    assert "agent_profiler.trace.duration" in _profile_metric_names(upstream)


def test_the_cli_sends_the_headers_and_shows_their_values_nowhere(
    upstream: AuthenticatedUpstream,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    http_port, grpc_port = free_ports(2)
    seen: dict[str, Any] = {}

    def drive() -> None:
        try:
            wait_until(lambda: _alive(http_port), 20, "serve to start")
            _send_everything(http_port)
            wait_until(lambda: upstream.items(TRACES) == SPANS, 10, "the spans upstream")
            status, _, body = http_exchange(f"http://127.0.0.1:{http_port}/health")
            assert status == 200
            seen["health"] = body.decode()
            seen["ready"] = http_exchange(f"http://127.0.0.1:{http_port}/health/ready")[2].decode()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    driver = threading.Thread(target=drive)
    caplog.set_level(logging.DEBUG)
    driver.start()
    code = cli.main(
        [
            "serve",
            "--http-port",
            str(http_port),
            "--grpc-port",
            str(grpc_port),
            "--quiet-period",
            "0.05",
            "--upstream",
            upstream.grpc_url,
            "--upstream-header",
            f"Authorization={TOKEN}",
            "--upstream-header",
            f"X-Scope-OrgID={TENANT}",
            "--upstream-ca",
            str(pki.ca),
            "--upstream-client-cert",
            str(pki.client_cert),
            "--upstream-client-key",
            str(pki.client_key),
            "--upstream-compression",
            "gzip",
        ]
    )
    driver.join()
    assert code == 0
    assert json.loads(seen["health"])["counts"]["forwarded"] == SPANS
    captured = capsys.readouterr()
    everything = "\n".join([caplog.text, captured.out, captured.err, seen["health"], seen["ready"]])
    assert "authorization, x-scope-orgid (values not shown)" in caplog.text  # the start-up line names them
    for secret in (TOKEN, "upstream-s3cret", TENANT):
        assert secret not in everything


def _alive(http_port: int) -> bool:
    try:
        return http_exchange(f"http://127.0.0.1:{http_port}/health/live", timeout=1)[0] == 200
    except OSError:
        return False


class ByteCountingRelay:
    """A TCP relay in front of ``port`` that counts the bytes the client sent (TLS passes through it)."""

    def __init__(self, port: int) -> None:
        self.sent = 0
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if count:
                    self.sent += len(data)
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_gzip_shrinks_what_goes_over_the_wire(protocol: str, upstream: AuthenticatedUpstream, pki: Pki) -> None:
    request = _trace()
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="prompt").value.string_value = "ab" * 100_000
    sent = {}
    for compression in ("gzip", "none"):
        relay = ByteCountingRelay(upstream.grpc_port if protocol == "grpc" else upstream.http_port)
        connection = UpstreamConnection(
            (("authorization", TOKEN), ("x-scope-orgid", TENANT)),
            compression,
            UpstreamTls(str(pki.ca), str(pki.client_cert), str(pki.client_key)),
        )
        exporter = make_exporter(f"https://127.0.0.1:{relay.port}", protocol, 5, TRACES, connection)
        exporter.export(request)
        exporter.close()
        relay.close()
        sent[compression] = relay.sent
    assert upstream.items(TRACES) == 2 * SPANS  # both arrived whole
    assert sent["none"] > 200_000 > 20_000 > sent["gzip"]
