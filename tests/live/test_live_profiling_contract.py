"""The plugin and ``serve`` profile the same spans alike: the same ``agent_profiler.*`` attributes on
every span and the same profile metrics, given the same category overrides and prices.

The same traces run through both, end to end with real components: the in-process profiler on a real
``TracerProvider`` (exported to an in-memory exporter, metrics to an in-memory reader), and ``serve``'s
``Pipeline`` fed the OTLP request the OTLP exporter makes of those spans, forwarding over OTLP/HTTP to
a real upstream in this process, with its options taken from ``serve``'s command line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agent_profiler import cli
from otel_agent_profiler.adapters.otlp_proto import any_value
from otel_agent_profiler.cli.serve import profile_options
from otel_agent_profiler.core.categories import classify
from otel_agent_profiler.live import attributes as attr
from otel_agent_profiler.live.profile_metrics import CRITICAL_PATH_COST, METRICS, ProfileMetrics
from otel_agent_profiler.plugin.config import _OPTIONS
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor
from otel_agent_profiler.service.forwarder import Forwarder, HttpExporter
from otel_agent_profiler.service.pipeline import Pipeline, PipelineConfig
from tests.support.backends import wait_until

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
PREFIX = "agent_profiler."
CHUNK = "gen_ai.content.completion.chunk"
OVERRIDES = "fetch_*=tool,lookup_*=retrieval"
PRICES = json.dumps(
    {
        "gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
        "gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075},
        "text-embedding-3-small": {"input": 0.02, "output": 0},
    }
)

Attributes = dict[str, Any]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, _ in _OPTIONS.values():
        monkeypatch.delenv(variable, raising=False)


# -- the traces -----------------------------------------------------------------------------------


def _child(tracer: trace.Tracer, parent: trace.Span, name: str, start: int, end: int, **attributes: Any) -> None:
    span = tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start, attributes=attributes)
    span.end(end_time=end)


def _travel_agent(tracer: trace.Tracer, base: int) -> None:
    """A priced, streaming LLM call, an embedding, overridden and explicit categories, an error."""
    root = tracer.start_span(
        "invoke_agent travel",
        context=Context(),
        kind=SpanKind.SERVER,
        start_time=base,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
    )
    llm = tracer.start_span(
        "chat gpt-4o",
        context=trace.set_span_in_context(root),
        kind=SpanKind.CLIENT,
        start_time=base + 2 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 90_000,
            "gen_ai.usage.output_tokens": 200,
            "gen_ai.usage.cache_read.input_tokens": 400,
        },
    )
    llm.add_event(CHUNK, {"n": 1}, timestamp=base + 9 * MS)
    llm.add_event(CHUNK, {"n": 2}, timestamp=base + 15 * MS)
    llm.end(end_time=base + 30 * MS)
    _child(
        tracer,
        root,
        "embeddings text-embedding-3-small",
        base + 31 * MS,
        base + 34 * MS,
        **{
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.usage.input_tokens": 50,
        },
    )
    _child(tracer, root, "fetch_weather", base + 35 * MS, base + 60 * MS, city="Lisbon")
    _child(tracer, root, "lookup_hotels", base + 35 * MS, base + 50 * MS)
    _child(tracer, root, "fetch_prices", base + 61 * MS, base + 70 * MS, **{"agent_profiler.category": "memory"})
    failed = tracer.start_span("fetch_visa", context=trace.set_span_in_context(root), start_time=base + 71 * MS)
    failed.set_status(Status(StatusCode.ERROR, "timeout"))
    failed.end(end_time=base + 80 * MS)
    root.end(end_time=base + 85 * MS)


def _research_agent(tracer: trace.Tracer, base: int) -> None:
    """A sub-agent with parallel calls to a dated snapshot (priced by its family), and a local tool."""
    root = tracer.start_span(
        "invoke_agent research",
        context=Context(),
        start_time=base,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "research"},
    )
    sub = tracer.start_span(
        "invoke_agent summarizer",
        context=trace.set_span_in_context(root),
        start_time=base + 1 * MS,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "summarizer"},
    )
    for i in range(2):
        _child(
            tracer,
            sub,
            "chat gpt-4o-mini",
            base + 2 * MS,
            base + (40 + 10 * i) * MS,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.provider.name": "openai",
                "gen_ai.usage.input_tokens": 3000 + i,
                "gen_ai.usage.output_tokens": 100,
            },
        )
    sub.end(end_time=base + 52 * MS)
    _child(
        tracer,
        root,
        "execute_tool search",
        base + 53 * MS,
        base + 70 * MS,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    )
    _child(tracer, root, "lookup_cache", base + 71 * MS, base + 72 * MS)
    root.end(end_time=base + 75 * MS)


def _run_agents(tracer: trace.Tracer) -> None:
    _travel_agent(tracer, T0)
    _research_agent(tracer, T0 + 100 * MS)
    _travel_agent(tracer, T0 + 200 * MS)


# -- the plugin -----------------------------------------------------------------------------------


def _through_the_plugin() -> tuple[list[ReadableSpan], dict[int, Attributes], Mapping[Any, Any]]:
    """The spans as made (for serve), each span's profile attributes as exported, and the metrics."""
    originals, exported = InMemorySpanExporter(), InMemorySpanExporter()
    reader = InMemoryMetricReader()
    profiler = AgentProfilerSpanProcessor(
        downstream=[SimpleSpanProcessor(exported)],
        meter_provider=MeterProvider(metric_readers=[reader]),
        category_overrides=OVERRIDES,
        prices=PRICES,
        # serve writes every attribute on every span; the plugin does with this option.
        span_attributes="all",
    )
    provider = TracerProvider(resource=Resource({"service.name": "agents"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(originals))
    provider.add_span_processor(profiler)
    try:
        _run_agents(provider.get_tracer("contract", "1.0"))
        assert profiler.force_flush(10_000)
        spans = list(originals.get_finished_spans())
        attributes = {
            span.context.span_id: {k: v for k, v in span.attributes.items() if k.startswith(PREFIX)}
            for span in exported.get_finished_spans()
        }
        assert len(attributes) == len(spans)
        return spans, attributes, _profile_metrics(reader)
    finally:
        provider.shutdown()


# -- serve ----------------------------------------------------------------------------------------


class _Upstream:
    """An OTLP/HTTP receiver in this process that keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: dict[int, Any] = {}
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    with upstream._lock:
                        for resource in request.resource_spans:
                            for scope in resource.scope_spans:
                                for span in scope.spans:
                                    upstream.spans[int.from_bytes(span.span_id, "big")] = span
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def received(self) -> int:
        with self._lock:
            return len(self.spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream()
    yield server
    server.close()


def _through_serve(spans: list[ReadableSpan], upstream: _Upstream) -> tuple[dict[int, Attributes], Mapping[Any, Any]]:
    """Each span's profile attributes as forwarded upstream, and the metrics."""
    args = cli._build_parser().parse_args(["serve", "--category-overrides", OVERRIDES, "--prices", PRICES])
    reader = InMemoryMetricReader()
    forwarder = Forwarder(HttpExporter(upstream.url))
    pipeline = Pipeline(
        PipelineConfig(quiet_period_s=0.05, profile_options=profile_options(args, {})),
        forwarder,
        ProfileMetrics(MeterProvider(metric_readers=[reader])),
    )
    try:
        assert pipeline.receive(encode_spans(spans)) == len(spans)
        wait_until(lambda: upstream.received() == len(spans), 10, "serve to forward every span")
    finally:
        pipeline.stop()
        forwarder.close(timeout_s=5)
    assert pipeline.health()["counts"]["traces_profiled"] == 3
    attributes = {
        span_id: {kv.key: any_value(kv.value) for kv in span.attributes if kv.key.startswith(PREFIX)}
        for span_id, span in upstream.spans.items()
    }
    return attributes, _profile_metrics(reader)


# -- the metrics ----------------------------------------------------------------------------------


def _profile_metrics(reader: InMemoryMetricReader) -> dict[tuple[str, frozenset[tuple[str, Any]]], Any]:
    """Every data point of the profile metrics, by metric name and attributes."""
    points: dict[tuple[str, frozenset[tuple[str, Any]]], Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name not in METRICS:
                    continue
                for point in metric.data.data_points:
                    key = (metric.name, frozenset(dict(point.attributes or {}).items()))
                    if isinstance(point, HistogramDataPoint):
                        points[key] = (point.count, tuple(point.bucket_counts), point.min, point.max, point.sum)
                    else:
                        assert isinstance(point, NumberDataPoint)
                        points[key] = point.value
    return points


def _same_metrics(plugin: Mapping[Any, Any], serve: Mapping[Any, Any]) -> None:
    assert sorted(plugin, key=repr) == sorted(serve, key=repr)
    for key, value in plugin.items():
        if isinstance(value, tuple):
            # A histogram's sum adds the traces' values in the order they were profiled, which
            # may differ; counts, buckets and extremes are exact.
            assert value[:4] == serve[key][:4], key
            assert value[4] == pytest.approx(serve[key][4], rel=1e-12), key
        elif isinstance(value, float) and key[0] == CRITICAL_PATH_COST:
            # The same for a running total of costs (times are added in integer nanoseconds).
            assert value == pytest.approx(serve[key], rel=1e-12), key
        else:
            assert value == serve[key], key


# -- the contract ---------------------------------------------------------------------------------


def test_the_plugin_and_serve_give_the_same_attributes_and_metrics(upstream: _Upstream) -> None:
    spans, plugin_attributes, plugin_metrics = _through_the_plugin()
    serve_attributes, serve_metrics = _through_serve(spans, upstream)

    assert set(serve_attributes) == set(plugin_attributes)
    for span in spans:
        span_id = span.context.span_id
        assert serve_attributes[span_id] == plugin_attributes[span_id], span.name
    _same_metrics(plugin_metrics, serve_metrics)

    # The traces exercise what serve used to ignore: overrides beat the conventions, prices give costs.
    by_name = {span.name: plugin_attributes[span.context.span_id] for span in spans}
    assert classify("fetch_weather", {}) != "tool"
    assert by_name["fetch_weather"][attr.CATEGORY] == "tool"
    assert by_name["lookup_hotels"][attr.CATEGORY] == "retrieval"
    assert by_name["fetch_prices"][attr.CATEGORY] == "memory"  # the span's own category beats the overrides
    assert by_name["chat gpt-4o"][attr.COST_USD] > 0
    assert by_name["chat gpt-4o-mini"][attr.COST_USD] > 0
    assert by_name["chat gpt-4o"][attr.CONTEXT_WINDOW_USE] > 0.5
    assert by_name["invoke_agent travel"][attr.TRACE_COST_USD] > 0
    assert any(name == "agent_profiler.trace.critical_path.cost" for name, _ in plugin_metrics)
