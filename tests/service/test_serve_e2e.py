"""``otel-agent-profiler serve`` end to end, with real rotel collectors and real SDK apps.

app (OTel SDK, OTLP/gRPC) -> rotel -> serve (subprocess) -> rotel (blackhole, debug output): spans arrive
enriched with the values the core computes on the same spans; a trace continued by a second process is
one tree. Also: upstream down -> the sender sees OTLP's retryable status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_agent_profiler.adapters.otlp_proto import records_from_proto
from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.core import profile_trace, trace_to_dict
from otel_agent_profiler.core.pricing import with_built_in_prices
from otel_agent_profiler.live.enrichment import span_attributes, trace_attributes
from otel_agent_profiler.service.app import ProfilingService, ServeConfig
from otel_agent_profiler.service.pipeline import PipelineConfig
from tests.support.backends import (
    BackendProcess,
    Rotel,
    artifact_dir,
    free_port,
    free_ports,
    http_exchange,
    http_get,
    port_open,
    wait_until,
)

pytestmark = pytest.mark.e2e

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

# The second service: continues the trace from TRACEPARENT, exports to RECEIVER, prints its spans (OTLP hex).
CHILD_APP = r"""
import os, time
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

memory = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "tool-service"}))
provider.add_span_processor(SimpleSpanProcessor(memory))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["RECEIVER"], insecure=True)))
tracer = provider.get_tracer("tool-service")
parent = TraceContextTextMapPropagator().extract({"traceparent": os.environ["TRACEPARENT"]})
with tracer.start_as_current_span("POST /search", context=parent, kind=SpanKind.SERVER):
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    with tracer.start_as_current_span("execute_tool search", attributes=tool):
        time.sleep(0.03)
provider.shutdown()
print(encode_spans(memory.get_finished_spans()).SerializeToString().hex())
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


@pytest.fixture
def serve_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., tuple[BackendProcess, int, int]]]:
    """Start ``otel-agent-profiler serve`` as a subprocess on free ports; returns (process, http, grpc port)."""
    started: list[BackendProcess] = []

    def start(*args: str) -> tuple[BackendProcess, int, int]:
        http_port, grpc_port = free_ports(2)
        argv = [sys.executable, "-m", "otel_agent_profiler", "serve", "--http-port", str(http_port)]
        argv += ["--grpc-port", str(grpc_port), *args]
        log_dir = artifact_dir("e2e", request.node.nodeid)
        process = BackendProcess("serve", argv, log_dir / "serve.log", _env())
        process.start()
        started.append(process)
        wait_until(
            lambda: port_open(http_port) and port_open(grpc_port),
            20,
            "serve to listen",
            alive=process.check_alive,
            details=process.log_tail,
        )
        return process, http_port, grpc_port

    yield start
    for process in started:
        process.stop()


def _health(http_port: int) -> dict[str, Any]:
    status, body = http_get(f"http://127.0.0.1:{http_port}/health")
    assert status == 200
    return json.loads(body)  # type: ignore[no-any-return]


def _matches(got: Any, want: Any) -> bool:
    if isinstance(want, float) and not isinstance(want, bool):
        return isinstance(got, float) and got == pytest.approx(want, rel=1e-9, abs=1e-9)
    return bool(got == want) and type(got) is type(want)


def test_spans_from_two_services_are_profiled_as_one_trace_and_forwarded_enriched(
    rotel_factory: Callable[..., Rotel], serve_factory: Callable[..., tuple[BackendProcess, int, int]]
) -> None:
    sink = rotel_factory(name="rotel-upstream")
    serve, http_port, grpc_port = serve_factory(
        "--upstream", sink.grpc_url, "--upstream-protocol", "grpc", "--quiet-period", "1.5", "--metrics-interval", "1"
    )
    relay = rotel_factory(name="rotel-relay", exporter_endpoint=f"http://127.0.0.1:{grpc_port}", protocol="grpc")

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-service"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=relay.grpc_endpoint, insecure=True)))
    tracer = provider.get_tracer("agent-service")
    chat: dict[str, str | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 120,
    }
    with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes=chat):
            time.sleep(0.02)
        with tracer.start_as_current_span("POST tool-service", kind=SpanKind.CLIENT):
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(carrier)
            child = subprocess.run(
                [sys.executable, "-c", CHILD_APP],
                env={**_env(), "RECEIVER": relay.grpc_endpoint, "TRACEPARENT": carrier["traceparent"]},
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes=chat):
            time.sleep(0.01)
    provider.shutdown()

    records = records_from_spans(memory.get_finished_spans()) + records_from_proto(bytes.fromhex(child.stdout.strip()))
    assert len(records) == 6
    profile = profile_trace(records, prices=with_built_in_prices(None))  # serve's default prices
    trace_id = profile.trace_id
    (root,) = profile.roots  # the child service's root continues the first service's span
    assert root.record.name == "invoke_agent planner"
    by_id = {s.span_id: s for s in profile.spans}

    def all_enriched(spans: list[Any]) -> bool:
        ids = {s.span_id for s in spans if s.trace_id == trace_id and "agent_profiler.category" in s.attributes}
        return ids >= set(by_id)

    spans = [s for s in sink.wait_for_spans(all_enriched, timeout=30, what="enriched spans") if s.trace_id == trace_id]
    assert {s.span_id for s in spans} == set(by_id)
    for span in spans:
        expected = span_attributes(by_id[span.span_id])
        if span.span_id == root.span_id:
            expected.update(trace_attributes(profile, complete=True))
        else:
            assert "agent_profiler.trace.span_count" not in span.attributes, span.name
        for key, value in expected.items():
            assert _matches(span.attributes.get(key), value), (span.name, key, span.attributes.get(key), value)
        assert span.attributes.get("service.name") is None  # resource attributes stay on the resource
    by_name = {s.name: s for s in spans}
    assert by_name["POST /search"].resource["service.name"] == "tool-service"
    assert by_name["invoke_agent planner"].resource["service.name"] == "agent-service"
    assert by_name["invoke_agent planner"].attributes["agent_profiler.trace.span_count"] == 6
    assert by_name["execute_tool search"].attributes["gen_ai.tool.name"] == "search"  # originals kept

    status, body = http_get(f"http://127.0.0.1:{http_port}/profiles/{trace_id}")
    assert status == 200
    assert json.loads(body) == json.loads(json.dumps(trace_to_dict(profile)))
    status, body = http_get(f"http://127.0.0.1:{http_port}/profiles")
    assert status == 200 and json.loads(body)["traces"][0]["trace_id"] == trace_id
    assert http_get(f"http://127.0.0.1:{http_port}/profiles/{'ab' * 16}")[0] == 404
    health = wait_until(
        lambda: (h := _health(http_port))["counts"]["forwarded"] == 6 and h,
        10,
        "forwarded count",
    )
    assert health["status"] == "ok"
    assert health["counts"]["received"] == health["counts"]["profiled"] == 6
    assert health["counts"]["late"] == health["counts"]["over_caps"] == health["counts"]["failed"] == 0

    duration = sink.wait_for_metric("agent_profiler.trace.duration", timeout=15)
    assert duration.resource["service.name"] == "otel-agent-profiler"
    assert duration.data_points[0].attributes["agent_profiler.root_operation"] == root.operation

    # Held at shutdown: a trace still within its quiet period is profiled and forwarded on SIGTERM.
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("late").start_as_current_span("invoke_agent closing"):
        pass
    provider.shutdown()
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        channel.unary_unary(EXPORT)(encode_spans(memory.get_finished_spans()).SerializeToString(), timeout=10)
    assert serve.stop() == 0
    closing = sink.wait_for_span("invoke_agent closing", timeout=15)
    assert closing.attributes["agent_profiler.trace.complete"] is False
    assert closing.attributes["agent_profiler.trace.span_count"] == 1


def _post(port: int, body: bytes) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    status, headers, _ = http_exchange(request)
    return status, headers


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_upstream_down_gives_senders_the_retryable_status(protocol: str) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = ServeConfig(
        http_port=0,
        grpc_port=0,
        upstream=down,
        upstream_protocol=protocol,
        export_timeout_s=1,
        shutdown_grace_s=1,
        pipeline=PipelineConfig(quiet_period_s=0.05, max_pending_spans=5),
    )
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i in range(4):
        with tracer.start_as_current_span(f"invoke_agent run{i}"), tracer.start_as_current_span("execute_tool x"):
            pass
    provider.shutdown()
    body = encode_spans(memory.get_finished_spans()).SerializeToString()

    with ProfilingService(config) as service, grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT)
        export(body, timeout=10)  # accepted: nothing has failed yet

        def unavailable() -> bool:
            try:
                export(body, timeout=10)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNAVAILABLE
                return True
            return False

        wait_until(unavailable, 15, "gRPC UNAVAILABLE")
        status, headers = _post(service.http_port, body)
        assert status == 503 and headers["Retry-After"] == "1"
        # Pushed back as soon as the cap is reached, maybe before the first export attempt has failed.
        health = wait_until(
            lambda: (h := _health(service.http_port))["status"] == "degraded" and h, 10, "degraded status"
        )
        assert health["counts"]["forwarded"] == 0 and health["counts"]["rejected_requests"] >= 2
    # Stopped: what could not be forwarded is counted as failed, nothing hangs.
    assert service.pipeline.forwarder is not None
    assert service.pipeline.forwarder.failed >= 8


def test_http_upstream_caps_and_json_input(
    rotel_factory: Callable[..., Rotel], serve_factory: Callable[..., tuple[BackendProcess, int, int]]
) -> None:
    sink = rotel_factory(name="rotel-upstream")
    _, http_port, _ = serve_factory(
        "--upstream",
        sink.http_url,
        "--upstream-protocol",
        "http",
        "--quiet-period",
        "0.3",
        "--max-spans-per-trace",
        "2",
        "--metrics-interval",
        "1",
    )
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    start = time.time_ns()

    def span(span_id: str, parent: str, name: str, offset_ms: int, length_ms: int) -> dict[str, Any]:
        return {
            "traceId": trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start + offset_ms * 1_000_000),
            "endTimeUnixNano": str(start + (offset_ms + length_ms) * 1_000_000),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}],
        }

    spans = [
        span("a000000000000001", "", "root", 0, 100),
        span("a000000000000002", "a000000000000001", "execute_tool one", 10, 40),
        span("a000000000000003", "a000000000000001", "execute_tool two", 50, 40),
    ]
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "json"}, "spans": spans}]}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{http_port}/v1/traces",
        data=json.dumps(document).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        response.read()

    def all_three(found: list[Any]) -> bool:
        return len({s.span_id for s in found if s.trace_id == trace_id}) == 3

    received = {s.span_id: s for s in sink.wait_for_spans(all_three, timeout=20) if s.trace_id == trace_id}
    # Over the span cap: forwarded unprofiled, not dropped.
    assert "agent_profiler.category" not in received["a000000000000003"].attributes
    assert received["a000000000000001"].attributes["agent_profiler.trace.span_count"] == 2
    assert received["a000000000000002"].attributes["agent_profiler.category"] == "tool"
    health = wait_until(lambda: (h := _health(http_port))["counts"]["forwarded"] == 3 and h, 10, "forwarded count")
    assert health["counts"]["over_caps"] == 1 and health["counts"]["profiled"] == 2

    spans_metric = sink.wait_for_metric("agent_profiler.spans", timeout=15)
    outcomes = {p.attributes["agent_profiler.outcome"]: p.values for p in spans_metric.data_points}
    assert "unprofiled_span_cap" in outcomes and "profiled" in outcomes
