"""``serve`` forwarding to the real OpenTelemetry Collector when the Collector wants credentials.

The Collector's OTLP receivers (gRPC and HTTP) serve TLS with a certificate from a private CA, ask every client
for a certificate signed by that CA (mutual TLS: ``tls.client_ca_file``) and check a bearer token (the contrib
``bearertokenauth`` extension); what they take is written by the ``file`` exporter, one file per signal.

Eight ``serve`` processes run the command as a user would, at once (each takes seconds to start): for each
protocol, one with the credentials as options, one with them only in the ``OTEL_EXPORTER_OTLP_*`` variables the
OpenTelemetry SDK reads, one with a wrong token and one without the client certificate. Each sends one trace,
one metric and one log record with names of its own, so that what the Collector wrote can be told apart; each
test then asks one question of the runs. The requests are gzip-compressed (the option, or the variable); that
gzip shrinks what goes over the wire is tested in ``tests/service/test_serve_authenticated_upstream.py``.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_agent_profiler.live import attributes
from otel_agent_profiler.service.signals import LOGS, METRICS, TRACES
from tests.support.authenticated_upstream import Pki, make_pki
from tests.support.backends import (
    HOST,
    BackendProcess,
    _clean_env,
    artifact_dir,
    free_ports,
    http_exchange,
    wait_until,
)
from tests.support.go_backends import Otelcol, require_go_backends
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

TOKEN = "upstream-s3cret-9f8e7d"  # the Collector's bearer token
WRONG_TOKEN = "not-the-right-one-5a6b"
SPANS = 4
PROTOCOLS = ("grpc", "http")
SCENARIOS = ("options", "variables", "wrong_token", "no_client_cert")


def collector_config(pki: Pki, out: Path, *, health_port: int, grpc_port: int, http_port: int) -> str:
    tls_and_auth = f"""\
        tls:
          cert_file: {pki.server_cert}
          key_file: {pki.server_key}
          client_ca_file: {pki.ca}
        auth:
          authenticator: bearertokenauth
"""
    files = "".join(
        f"""\
  file/{signal_name}:
    path: {out / f"{signal_name}.jsonl"}
    flush_interval: 100ms
"""
        for signal_name in ("traces", "metrics", "logs")
    )
    return f"""\
extensions:
  health_check:
    endpoint: {HOST}:{health_port}
  bearertokenauth:
    scheme: Bearer
    token: {TOKEN}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {HOST}:{grpc_port}
{tls_and_auth}      http:
        endpoint: {HOST}:{http_port}
{tls_and_auth}exporters:
{files}service:
  extensions: [health_check, bearertokenauth]
  pipelines:
    traces: {{receivers: [otlp], exporters: [file/traces]}}
    metrics: {{receivers: [otlp], exporters: [file/metrics]}}
    logs: {{receivers: [otlp], exporters: [file/logs]}}
"""


def serve_settings(scenario: str, url: str, protocol: str, pki: Pki) -> tuple[list[str], dict[str, str]]:
    """The options and variables of one run: the upstream's credentials as options, or only as variables."""
    if scenario == "variables":
        return [], {
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc" if protocol == "grpc" else "http/protobuf",
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca),
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(pki.client_cert),
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(pki.client_key),
        }
    options = ["--upstream", url, "--upstream-protocol", protocol, "--upstream-compression", "gzip"]
    options += ["--upstream-ca", str(pki.ca)]
    token = WRONG_TOKEN if scenario == "wrong_token" else TOKEN
    options += ["--upstream-header", f"Authorization=Bearer {token}"]
    if scenario != "no_client_cert":
        options += ["--upstream-client-cert", str(pki.client_cert), "--upstream-client-key", str(pki.client_key)]
    return options, {}


@dataclass
class ServeRun:
    """One ``serve`` process: what it was given to send, and what it said and counted."""

    name: str
    trace_id: bytes
    returncode: int | None = None
    log: str = ""
    health: str = ""

    @property
    def counts(self) -> dict[str, Any]:
        counts: dict[str, Any] = json.loads(self.health)
        return counts

    @property
    def trace_id_hex(self) -> str:
        return self.trace_id.hex()


def trace_request(run: ServeRun) -> ExportTraceServiceRequest:
    """One trace: an agent span and ``SPANS - 1`` tool spans under it."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name").value.string_value = run.name
    scope = resource.scope_spans.add()
    root = scope.spans.add(name=f"invoke_agent {run.name}", trace_id=run.trace_id, span_id=b"\x01" * 8)
    root.start_time_unix_nano, root.end_time_unix_nano = 1_000_000_000, 5_000_000_000
    for i in range(SPANS - 1):
        span = scope.spans.add(name=f"execute_tool t{i}", trace_id=run.trace_id, span_id=bytes([2 + i]) * 8)
        span.parent_span_id = root.span_id
        span.start_time_unix_nano, span.end_time_unix_nano = 1_000_000_000 + i, 2_000_000_000 + i
    return request


def metrics_request(run: ServeRun) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name=f"app.queue_depth.{run.name}")
    metric.gauge.data_points.add(time_unix_nano=1, as_double=3.0)
    return request


def logs_request(run: ServeRun) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add().log_records.add(time_unix_nano=1).body.string_value = run.name
    return request


def post(http_port: int, path: str, message: Any) -> int:
    request = urllib.request.Request(
        f"http://{HOST}:{http_port}{path}",
        data=message.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    return http_exchange(request)[0]


def signal_counts(run_health: dict[str, Any], signal_name: str) -> dict[str, int]:
    counts: dict[str, int] = run_health["signals"][signal_name]
    return counts


def run_serve(scenario: str, protocol: str, url: str, pki: Pki, logs: Path, trace_byte: int) -> ServeRun:
    """Start ``serve``, send it a trace, a metric and a log record, wait for their fate, stop it with SIGTERM."""
    run = ServeRun(f"{protocol}_{scenario}", bytes([trace_byte]) * 16)
    options, variables = serve_settings(scenario, url, protocol, pki)
    # Ports 0: serve picks free ones and names them in its start-up line (eight at once, none can collide).
    argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", "0", "--grpc-port", "0"]
    argv += ["--quiet-period", "0.05", "--shutdown-grace", "1"]
    argv += ["--metrics-interval", "60", *options]  # the profile metrics go out once, at the stop
    process = BackendProcess(
        run.name, argv, logs / f"serve-{run.name}.log", _clean_env() | variables | {"PYTHONPATH": str(ROOT)}
    )
    process.start()

    def health() -> dict[str, Any]:
        status, _, body = http_exchange(f"http://{HOST}:{http_port}/health", timeout=2)
        run.health = body.decode()
        return run.counts if status == 200 else {}

    def started() -> int | None:
        found = re.search(r"serve: OTLP/HTTP on [0-9.]+:(\d+)", process.log_text())
        return int(found.group(1)) if found else None

    def settled() -> bool:
        counts = health()
        if not counts:
            return False
        if scenario == "no_client_cert":  # retried until the stop: wait for each signal's first failure
            return all(
                f"holding {item} and retrying" in process.log_text() for item in ("spans", "data points", "log records")
            )
        outcome = "failed" if scenario == "wrong_token" else "forwarded"
        return counts["counts"][outcome] == SPANS and all(
            signal_counts(counts, name)[outcome] == 1 for name in ("metrics", "logs")
        )

    try:
        http_port = wait_until(
            started, 30, f"serve ({run.name}) to start", alive=process.check_alive, details=process.log_tail
        )
        assert post(http_port, TRACES.http_path, trace_request(run)) == 200
        assert post(http_port, METRICS.http_path, metrics_request(run)) == 200
        assert post(http_port, LOGS.http_path, logs_request(run)) == 200
        wait_until(settled, 20, f"serve ({run.name}) to settle", alive=process.check_alive, details=process.log_tail)
    finally:
        run.returncode = process.stop(timeout=20)  # SIGTERM: serve drains, reports and exits
        # The log without its first line, the command line the launcher wrote (with the token, as given).
        run.log = process.log_text().split("\n", 1)[-1]
    return run


@dataclass
class CollectorRun:
    runs: dict[str, ServeRun]
    out: Path
    collector: Otelcol

    def lines(self, signal_name: str) -> list[dict[str, Any]]:
        path = self.out / f"{signal_name}.jsonl"
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return [
            span
            for line in self.lines("traces")
            for resource in line["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
            if span["traceId"] == trace_id
        ]

    def metric_names(self) -> set[str]:
        return {
            metric["name"]
            for line in self.lines("metrics")
            for resource in line["resourceMetrics"]
            for scope in resource["scopeMetrics"]
            for metric in scope["metrics"]
        }

    def profiled_roots(self) -> set[str]:
        """The root operations of the ``agent_profiler.trace.duration`` points: one per ``serve`` that sent them."""
        return {
            attribute_values(point)["agent_profiler.root_operation"]
            for line in self.lines("metrics")
            for resource in line["resourceMetrics"]
            for scope in resource["scopeMetrics"]
            for metric in scope["metrics"]
            if metric["name"] == "agent_profiler.trace.duration"
            for point in metric["histogram"]["dataPoints"]
        }

    def log_bodies(self) -> list[str]:
        return [
            record["body"].get("stringValue", "")
            for line in self.lines("logs")
            for resource in line["resourceLogs"]
            for scope in resource["scopeLogs"]
            for record in scope["logRecords"]
        ]


@pytest.fixture(scope="module")
def collector_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorRun]:
    logs = artifact_dir("e2e", __name__)
    require_go_backends()
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    out = logs / "received"
    out.mkdir()
    health_port, grpc_port, http_port = free_ports(3)
    config = collector_config(pki, out, health_port=health_port, grpc_port=grpc_port, http_port=http_port)
    collector = Otelcol(config, logs, health_port=health_port, name="otelcol-authenticated")
    urls = {"grpc": f"https://{HOST}:{grpc_port}", "http": f"https://{HOST}:{http_port}"}
    try:
        collector.start()
        plan = [(scenario, protocol) for protocol in PROTOCOLS for scenario in SCENARIOS]
        with ThreadPoolExecutor(len(plan)) as pool:
            futures = [
                pool.submit(run_serve, scenario, protocol, urls[protocol], pki, logs, 1 + index)
                for index, (scenario, protocol) in enumerate(plan)
            ]
            runs = {run.name: run for run in (future.result() for future in futures)}
        result = CollectorRun(runs, out, collector)
        delivered = [run for run in runs.values() if run.name.endswith(("_options", "_variables"))]
        # The file exporter writes every 100 ms: wait for everything the Collector took.
        wait_until(
            lambda: all(
                len(result.spans(run.trace_id_hex)) == SPANS
                and run.name in result.log_bodies()
                and f"invoke_agent {run.name}" in result.profiled_roots()
                for run in delivered
            ),
            10,
            "the spans, logs and profile metrics in the Collector's files",
            alive=collector.process.check_alive,
            details=collector.process.log_tail,
        )
        yield result
    finally:
        collector.stop()


def attribute_values(span: dict[str, Any]) -> dict[str, Any]:
    """``{key: value}`` of an OTLP JSON span's attributes (the one field of each ``AnyValue``)."""
    return {item["key"]: next(iter(item["value"].values()), None) for item in span.get("attributes") or []}


DELIVERED = [f"{protocol}_{scenario}" for protocol in PROTOCOLS for scenario in ("options", "variables")]


@pytest.mark.parametrize("name", DELIVERED)
def test_every_span_arrives_profiled_through_mutual_tls_and_the_token(name: str, collector_run: CollectorRun) -> None:
    run = collector_run.runs[name]
    spans = collector_run.spans(run.trace_id_hex)
    assert len(spans) == SPANS and len({span["spanId"] for span in spans}) == SPANS
    for span in spans:
        found = attribute_values(span)
        assert found[attributes.CATEGORY] in {"agent", "tool", "internal"}, span["name"]
        assert float(found[attributes.SELF_TIME_MS]) >= 0 and attributes.CRITICAL_PATH_MS in found
    (root,) = [span for span in spans if not span.get("parentSpanId")]
    assert int(attribute_values(root)[attributes.TRACE_SPAN_COUNT]) == SPANS
    assert run.counts["counts"]["forwarded"] == SPANS and run.counts["counts"]["failed"] == 0
    assert run.returncode == 0, run.log
    assert f"received {SPANS} spans: {SPANS} forwarded, 0 not delivered" in run.log


@pytest.mark.parametrize("name", DELIVERED)
def test_metrics_logs_and_the_profile_metrics_arrive_the_same_way(name: str, collector_run: CollectorRun) -> None:
    run = collector_run.runs[name]
    assert f"app.queue_depth.{name}" in collector_run.metric_names()
    assert collector_run.log_bodies().count(name) == 1
    assert signal_counts(run.counts, "metrics")["forwarded"] == 1 == signal_counts(run.counts, "logs")["forwarded"]
    # serve's own metrics (the SDK's exporter, given the same credentials) went out at the stop
    assert f"invoke_agent {name}" in collector_run.profiled_roots()
    assert "Failed to export metrics" not in run.log and "Transient error" not in run.log


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_wrong_token_is_refused_counted_and_logged(protocol: str, collector_run: CollectorRun) -> None:
    run = collector_run.runs[f"{protocol}_wrong_token"]
    refused = "gRPC UNAUTHENTICATED" if protocol == "grpc" else "HTTP 401"
    assert f"{SPANS} spans not delivered: the upstream rejected them ({refused}" in run.log
    assert f"1 log records not delivered: the upstream rejected them ({refused}" in run.log
    assert run.counts["counts"]["failed"] == SPANS and run.counts["counts"]["forwarded"] == 0
    assert signal_counts(run.counts, "metrics")["failed"] == 1 == signal_counts(run.counts, "logs")["failed"]
    assert run.returncode == 1
    assert f"received {SPANS} spans: 0 forwarded, {SPANS} not delivered" in run.log
    assert collector_run.spans(run.trace_id_hex) == [] and run.name not in collector_run.log_bodies()
    assert f"invoke_agent {run.name}" not in collector_run.profiled_roots()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_without_the_client_certificate_the_tls_failure_is_logged_and_counted(
    protocol: str, collector_run: CollectorRun
) -> None:
    run = collector_run.runs[f"{protocol}_no_client_cert"]
    (first_failure,) = [line for line in run.log.splitlines() if "holding spans and retrying" in line]
    assert "TLS" in first_failure, first_failure  # says what failed, not only "unavailable"
    # Retried until the stop (the shutdown grace), then counted as not delivered.
    assert run.returncode == 1
    assert f"received {SPANS} spans: 0 forwarded, {SPANS} not delivered" in run.log
    assert collector_run.spans(run.trace_id_hex) == [] and run.name not in collector_run.log_bodies()
    assert f"app.queue_depth.{run.name}" not in collector_run.metric_names()
    assert f"invoke_agent {run.name}" not in collector_run.profiled_roots()


def test_no_token_is_in_any_log_line_or_health_answer(collector_run: CollectorRun) -> None:
    for run in collector_run.runs.values():
        assert run.log and run.health
        for secret in (TOKEN, WRONG_TOKEN, "s3cret", "not-the-right-one"):
            assert secret not in run.log, run.name
            assert secret not in run.health, run.name
        assert "headers authorization (values not shown)" in run.log  # the start-up line names the header only
