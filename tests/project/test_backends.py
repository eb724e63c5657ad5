"""Smoke tests of the real-backend plumbing (tests/support/backends.py) with the plain OpenTelemetry SDK.

They prove that spans and metrics leave an SDK, pass through a real collector (rotel) and land in real
backends (Arize Phoenix, Prometheus) with names, parents, units and attribute types intact, so the project's
own end-to-end tests can rely on the same fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

from tests.support.backends import (
    DebugMetric,
    Phoenix,
    Prometheus,
    Rotel,
    free_port,
    parse_debug_spans,
    parse_debug_value,
    phoenix_time_us,
)

ROOT_ATTRIBUTES = {
    "test.bool": True,
    "test.int": 42,
    "test.big_int": 2**53 + 1,
    "test.float": 0.25,
    "test.whole_float": 2.0,
    "test.str": "héllo, wörld",
    "test.str_array": ["a", "b"],
    "test.int_array": [1, 2, 3],
    "test.float_array": [1.5, 2.5],
    "test.bool_array": [True, False],
}


def _three_span_trace(provider: TracerProvider) -> list[ReadableSpan]:
    """root (SERVER) -> llm (CLIENT) -> tool (INTERNAL, ERROR); returns the finished spans as the SDK saw them."""
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.backends", "1.0")
    with tracer.start_as_current_span("agent.run", kind=SpanKind.SERVER, attributes=ROOT_ATTRIBUTES) as root:
        root.add_event("step", {"step.index": 1})
        with tracer.start_as_current_span("llm.call", kind=SpanKind.CLIENT) as llm:
            llm.set_attribute("llm.tokens", 17)
            with tracer.start_as_current_span("tool.call") as tool:
                tool.set_attribute("tool.args", '{"q": "x"}')
                tool.set_status(Status(StatusCode.ERROR, "tool failed"))
    return list(memory.get_finished_spans())


def _hex_trace_id(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


def _hex_span_id(span: ReadableSpan | SpanContext | None) -> str | None:
    if span is None:
        return None
    context = span if isinstance(span, SpanContext) else span.context
    return format(context.span_id, "016x")


@pytest.mark.e2e
@pytest.mark.parametrize("rotel_to_phoenix", ["grpc", "http"])
def test_sdk_to_rotel_to_phoenix(
    rotel_to_phoenix: str, rotel_factory: Callable[..., Rotel], phoenix: Phoenix, phoenix_project: str
) -> None:
    if rotel_to_phoenix == "grpc":
        rotel = rotel_factory(exporter_endpoint=phoenix.grpc_url, protocol="grpc")
    else:
        rotel = rotel_factory(exporter_endpoint=phoenix.base_url, protocol="http", traces_endpoint=phoenix.traces_url)

    provider = TracerProvider(
        resource=Resource.create({"service.name": "backend-smoke", "openinference.project.name": phoenix_project})
    )
    provider.add_span_processor(BatchSpanProcessor(GrpcSpanExporter(endpoint=rotel.grpc_endpoint, insecure=True)))
    try:
        sent = _three_span_trace(provider)
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()

    by_name = {s.name: s for s in sent}
    trace_id = _hex_trace_id(sent[0])
    stored = phoenix.spans(phoenix_project, trace_id, expected_count=3, timeout=30)
    assert sorted(s["name"] for s in stored) == ["agent.run", "llm.call", "tool.call"]
    got = {s["name"]: s for s in stored}

    for name, sdk_span in by_name.items():
        span = got[name]
        assert span["context"] == {"trace_id": trace_id, "span_id": _hex_span_id(sdk_span)}
        assert span["parent_id"] == _hex_span_id(sdk_span.parent)
        # Phoenix keeps microseconds: the SDK's nanoseconds go through a float, so +-1 us
        assert abs(phoenix_time_us(span["start_time"]) - sdk_span.start_time / 1000) <= 1
        assert abs(phoenix_time_us(span["end_time"]) - sdk_span.end_time / 1000) <= 1
        # OTel span kind is not kept: span_kind is OpenInference's, UNKNOWN without openinference/gen_ai hints
        assert span["span_kind"] == "UNKNOWN"

    assert got["agent.run"]["parent_id"] is None
    assert got["llm.call"]["parent_id"] == got["agent.run"]["context"]["span_id"]
    assert got["tool.call"]["parent_id"] == got["llm.call"]["context"]["span_id"]

    # attribute values and their types survive OTLP -> rotel -> Phoenix -> JSON
    root_attrs = got["agent.run"]["attributes"]
    assert root_attrs == ROOT_ATTRIBUTES
    for key, value in ROOT_ATTRIBUTES.items():
        assert type(root_attrs[key]) is type(value), key
        if isinstance(value, list):
            assert [type(v) for v in root_attrs[key]] == [type(v) for v in value], key
    assert got["llm.call"]["attributes"] == {"llm.tokens": 17}
    assert got["tool.call"]["attributes"] == {"tool.args": '{"q": "x"}'}
    assert (got["tool.call"]["status_code"], got["tool.call"]["status_message"]) == ("ERROR", "tool failed")
    assert got["agent.run"]["status_code"] == "UNSET"
    assert [(e["name"], e["attributes"]) for e in got["agent.run"]["events"]] == [("step", {"step.index": 1})]

    # rotel saw the same three spans, with the OTel kinds Phoenix does not keep
    debug = rotel.wait_for_spans(lambda ss: len([s for s in ss if s.trace_id == trace_id]) >= 3, what="3 spans")
    kinds = {s.name: s.kind for s in debug if s.trace_id == trace_id}
    assert kinds == {"agent.run": "SPAN_KIND_SERVER", "llm.call": "SPAN_KIND_CLIENT", "tool.call": "SPAN_KIND_INTERNAL"}
    root = next(s for s in debug if s.name == "agent.run")
    assert root.attributes == ROOT_ATTRIBUTES
    assert root.resource["openinference.project.name"] == phoenix_project
    assert root.scope == "tests.backends 1.0"
    assert rotel.problems() == []

    # the project isolates this test: exactly this trace's spans are in it
    assert sorted(s["context"]["span_id"] for s in phoenix.project_spans(phoenix_project)) == sorted(
        s["context"]["span_id"] for s in stored
    )


@pytest.fixture
def meter_provider_for() -> Iterator[Callable[[MetricExporter], tuple[MeterProvider, PeriodicExportingMetricReader]]]:
    providers: list[MeterProvider] = []

    def make(exporter: MetricExporter) -> tuple[MeterProvider, PeriodicExportingMetricReader]:
        # a long interval: the test decides when to export (force_flush)
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
        provider = MeterProvider(
            metric_readers=[reader], resource=Resource.create({"service.name": "backend-smoke"}), shutdown_on_exit=False
        )
        providers.append(provider)
        return provider, reader

    yield make
    for provider in providers:
        provider.shutdown()


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_sdk_metrics_to_rotel(
    protocol: str,
    rotel_factory: Callable[..., Rotel],
    meter_provider_for: Callable[[MetricExporter], tuple[MeterProvider, PeriodicExportingMetricReader]],
) -> None:
    rotel = rotel_factory()  # blackhole: only the debug log matters here
    exporter: MetricExporter
    if protocol == "grpc":
        exporter = GrpcMetricExporter(endpoint=rotel.grpc_endpoint, insecure=True)
    else:
        exporter = HttpMetricExporter(endpoint=rotel.http_metrics_url)
    provider, reader = meter_provider_for(exporter)
    meter = provider.get_meter("tests.backends.metrics", "2.0")
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration",
        unit="s",
        description="LLM call duration",
        explicit_bucket_boundaries_advisory=[0.1, 1.0, 10.0],
    )
    calls = meter.create_counter("agent.tool.calls", unit="{call}", description="tool calls")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1"}
    duration.record(0.05, chat)
    duration.record(0.5, chat)
    duration.record(5.0, chat)
    duration.record(2.0, {"gen_ai.operation.name": "embeddings"})
    calls.add(3, {"gen_ai.tool.name": "search", "ok": True})

    # force_flush() says True even when nothing was delivered (REFERENCE §1): believe the collector's log only
    reader.force_flush()
    metrics = rotel.wait_for_metrics(
        lambda ms: {"gen_ai.client.operation.duration", "agent.tool.calls"} <= {m.name for m in ms},
        timeout=10,
        what="both metrics",
    )
    last: dict[str, DebugMetric] = {m.name: m for m in metrics}

    hist = last["gen_ai.client.operation.duration"]
    assert (hist.unit, hist.description, hist.data_type) == ("s", "LLM call duration", "Histogram")
    assert hist.temporality == "AGGREGATION_TEMPORALITY_CUMULATIVE"
    assert hist.scope == "tests.backends.metrics 2.0"
    assert hist.resource["service.name"] == "backend-smoke"
    points = {p.attributes.get("gen_ai.operation.name"): p for p in hist.data_points}
    assert points["chat"].attributes == chat
    assert points["chat"].bounds == [0.1, 1.0, 10.0]
    assert points["chat"].bucket_counts == [1, 1, 1, 0]
    assert points["chat"].values["Count"] == 3
    assert points["chat"].values["Sum"] == pytest.approx(5.55)
    assert (points["chat"].values["Min"], points["chat"].values["Max"]) == (0.05, 5.0)
    assert points["embeddings"].values["Count"] == 1

    counter = last["agent.tool.calls"]
    assert (counter.unit, counter.data_type, counter.is_monotonic) == ("{call}", "Sum", True)
    assert len(counter.data_points) == 1
    assert counter.data_points[0].attributes == {"gen_ai.tool.name": "search", "ok": True}
    assert counter.data_points[0].values["Value"] == 3


@pytest.mark.e2e
def test_prometheus_scrapes_sdk_histogram(prometheus_factory: Callable[..., Prometheus]) -> None:
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as err:
        pytest.fail(f"{err}: a dev extra of the project; run scripts/test to install it", pytrace=False)

    registry = CollectorRegistry()  # private: no global state shared with other tests
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create({"service.name": "backend-smoke"}), shutdown_on_exit=False
    )
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        meter = provider.get_meter("tests.backends.prom", "3.0")
        duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", explicit_bucket_boundaries_advisory=[0.1, 1.0, 10.0]
        )
        calls = meter.create_counter("agent.tool.calls", unit="{call}")
        for value in (0.05, 0.5, 5.0):
            duration.record(value, {"gen_ai.operation.name": "chat"})
        calls.add(2, {"gen_ai.tool.name": "search"})

        prom = prometheus_factory([f"127.0.0.1:{port}"])
        selector = '{job="test", gen_ai_operation_name="chat"}'
        count = prom.wait_for(f"gen_ai_client_operation_duration_seconds_count{selector}", timeout=30)
        assert len(count) == 1
        labels = count[0]["metric"]
        assert labels["__name__"] == "gen_ai_client_operation_duration_seconds_count"
        assert labels["instance"] == f"127.0.0.1:{port}"
        assert (labels["otel_scope_name"], labels["otel_scope_version"]) == ("tests.backends.prom", "3.0")
        assert float(count[0]["value"][1]) == 3

        total = prom.query(f"gen_ai_client_operation_duration_seconds_sum{selector}")
        assert float(total[0]["value"][1]) == pytest.approx(5.55)
        buckets = {
            r["metric"]["le"]: float(r["value"][1])
            for r in prom.query(f"gen_ai_client_operation_duration_seconds_bucket{selector}")
        }
        assert buckets == {"0.1": 1, "1.0": 2, "10.0": 3, "+Inf": 3}
        quantile = prom.query(f"histogram_quantile(0.5, gen_ai_client_operation_duration_seconds_bucket{selector})")
        assert 0.1 <= float(quantile[0]["value"][1]) <= 1.0

        # counters get _total; curly-brace units add no suffix; resource attributes live in target_info only
        assert float(prom.query('agent_tool_calls_total{gen_ai_tool_name="search"}')[0]["value"][1]) == 2
        assert prom.query("gen_ai_client_operation_duration_count") == []
        assert prom.query('target_info{service_name="backend-smoke"}')
        assert "service_name" not in labels
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        provider.shutdown()


def test_parse_debug_value_shapes() -> None:
    assert parse_debug_value("Str(a, b)") == "a, b"
    assert parse_debug_value("Int(-3)") == -3
    assert parse_debug_value("Double(2)") == 2.0
    assert parse_debug_value("Bool(false)") is False
    assert parse_debug_value("Slice(Str(a), Str(b))") == ["a", "b"]
    assert parse_debug_value("Slice()") == []
    assert parse_debug_value("Map({...})") == "Map({...})"


def test_parse_debug_spans_reads_rotel_output() -> None:
    text = (
        "\x1b[2m2026-11-21T05:52:36.838106Z\x1b[0m \x1b[32m INFO\x1b[0m Starting Rotel.\n"
        "ResourceSpans #0\nResource SchemaURL: \nResource attributes:\n     -> service.name: Str(svc)\n"
        "ScopeSpans #0\nScopeSpans SchemaURL: \nInstrumentationScope x 1.0\nSpan #0\n"
        "    Trace ID       : 0af7651916cd43dd8448eb211c80319c\n    Parent ID      : b7ad6b7169203331\n"
        "    ID             : 00f067aa0ba902b7\n    Name           : child\n    Kind           : SPAN_KIND_CLIENT\n"
        "Start time: 10\nEnd time: 20\n    Status code    : STATUS_CODE_ERROR\n    Status message : boom\n"
        "Attributes:\n     -> n: Int(3)\n     -> arr: Slice(Bool(true))\n"
        "Links:\nSpanLink #0\n     -> Trace ID: 0af7651916cd43dd8448eb211c80319c\n     -> ID: b7ad6b7169203331\n"
        "     -> Attributes::\n          -> l: Str(y)\n"
    )
    [span] = parse_debug_spans(text)
    assert (span.name, span.kind, span.parent_id, span.start_ns, span.end_ns) == (
        "child",
        "SPAN_KIND_CLIENT",
        "b7ad6b7169203331",
        10,
        20,
    )
    assert (span.status_code, span.status_message) == ("STATUS_CODE_ERROR", "boom")
    assert span.attributes == {"n": 3, "arr": [True]}
    assert span.resource == {"service.name": "svc"}
    assert span.links == [
        {"Trace ID": "0af7651916cd43dd8448eb211c80319c", "ID": "b7ad6b7169203331", "attributes": {"l": "y"}}
    ]
