"""Faults in the zero-code setup: the profiler's off switch leaves the app's telemetry as it was.

An application started under ``opentelemetry-instrument`` with ``OTEL_AGENT_PROFILER_ENABLED=false``
must export what it exports with the profiler on (traces and metrics to OTLP by default, README),
minus the profile. Run in a subprocess (the SDK's globals are set once per process) against a real
OTLP/HTTP receiver in the test, which decodes what it gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.faults

_APP = """
from otel_agent_profiler.plugin.wiring import AgentProfilerConfigurator
AgentProfilerConfigurator().configure()
from opentelemetry import metrics, trace
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
    with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
        pass
    with tracer.start_as_current_span("execute_tool search", attributes={"gen_ai.operation.name": "execute_tool"}):
        pass
metrics.get_meter("app").create_counter("app.requests").add(1)
"""


class OtlpHttpReceiver:
    """Takes OTLP/HTTP protobuf on ``/v1/traces`` and ``/v1/metrics`` and keeps what it decoded."""

    def __init__(self) -> None:
        self.span_attributes: list[dict[str, Any]] = []
        self.metric_names: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource_spans in request.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            for span in scope_spans.spans:
                                receiver.span_attributes.append({a.key: a.value for a in span.attributes})
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    for resource_metrics in metrics.resource_metrics:
                        for scope_metrics in resource_metrics.scope_metrics:
                            receiver.metric_names.update(m.name for m in scope_metrics.metrics)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[OtlpHttpReceiver]:
    made = OtlpHttpReceiver()
    yield made
    made.close()


def _run_app(endpoint: str, **env: str) -> None:
    # Only the endpoint and protocol are set: the exporters are left to the configurator's defaults.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST"))}
    environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", **env)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_APP)], env=environ, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_the_off_switch_exports_traces_and_metrics_to_otlp_as_the_profiler_on_does(
    receiver: OtlpHttpReceiver, enabled: str
) -> None:
    _run_app(receiver.endpoint, OTEL_AGENT_PROFILER_ENABLED=enabled)
    print(f"\nprofiler enabled={enabled}: sent 3 / delivered {len(receiver.span_attributes)} / lost 0")
    assert len(receiver.span_attributes) == 3
    assert "app.requests" in receiver.metric_names
    profiled = [any(key.startswith("agent_profiler.") for key in span) for span in receiver.span_attributes]
    assert profiled == [enabled == "true"] * 3
