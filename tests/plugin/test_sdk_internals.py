"""Every SDK internal the profiler relies on still exists, with the shape it expects, in the installed SDK.

Each failure names the internal and the code that depends on it: an SDK upgrade that changes one
fails here first, instead of silently sending the profiler down its slower or less capable road.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from importlib.metadata import version

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk import _configuration as sdk_configuration, trace as sdk_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_agent_profiler import _sdk_internals as internals


def changed(internal: str, used_by: str) -> str:
    return (
        f"the OpenTelemetry SDK changed {internal}, which {used_by} relies on: "
        "update otel_agent_profiler/_sdk_internals.py (and its caller) for the new SDK"
    )


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-internals"}))
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    yield provider
    provider.shutdown()


@pytest.fixture
def ended_span(provider: TracerProvider) -> ReadableSpan:
    tracer = provider.get_tracer("sdk-internals")
    with tracer.start_as_current_span("parent") as parent:
        link = Link(parent.get_span_context(), {"link.key": "v"})
        with tracer.start_as_current_span("child", kind=SpanKind.CLIENT, links=[link]) as child:
            child.set_attribute("gen_ai.operation.name", "chat")
            child.add_event("chunk", {"index": 0})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    assert isinstance(child, ReadableSpan)
    return child


# -- a provider's span processors: plugin/wiring.py puts the profiler in front of the exporters ----------------


def test_provider_keeps_its_processors_in_a_tuple_under_a_lock(provider: TracerProvider) -> None:
    used_by = "plugin/wiring.py (install() putting the profiler in front of the exporting processors)"
    multi = getattr(provider, "_active_span_processor", None)
    assert multi is not None, changed("TracerProvider._active_span_processor", used_by)
    processors = getattr(multi, "_span_processors", None)
    assert isinstance(processors, tuple), changed("SynchronousMultiSpanProcessor._span_processors (a tuple)", used_by)
    assert [type(p) for p in processors] == [BatchSpanProcessor], changed(
        "SynchronousMultiSpanProcessor._span_processors (the added processors, in order)", used_by
    )
    lock = getattr(multi, "_lock", None)
    assert hasattr(lock, "__enter__") and hasattr(lock, "__exit__"), changed(
        "SynchronousMultiSpanProcessor._lock (a lock)", used_by
    )

    assert internals.span_processors(provider) == processors
    reached = InMemorySpanExporter()
    extra = SimpleSpanProcessor(reached)
    assert internals.replace_span_processors(provider, lambda current: (extra, *current))
    assert internals.span_processors(provider) == (extra, *processors)
    # The SDK calls what the tuple holds: the replacement is what spans now reach.
    provider.get_tracer("sdk-internals").start_span("after").end()
    assert [s.name for s in reached.get_finished_spans()] == ["after"], changed(
        "SynchronousMultiSpanProcessor._span_processors (the processors on_end is called on)", used_by
    )


# -- an exporter's endpoint: plugin/export_accounting.py names it when spans could not be exported -------------


def test_batch_span_processor_keeps_its_spans_in_a_bounded_deque() -> None:
    processor = BatchSpanProcessor(
        InMemorySpanExporter(), max_queue_size=7, max_export_batch_size=7, schedule_delay_millis=60_000
    )
    try:
        queue = internals.batch_queue(processor)
        assert queue is not None, changed(
            "BatchSpanProcessor._batch_processor._queue (BatchSpanProcessor.queue before SDK 1.34)",
            "the processor's pacing",
        )
        assert queue.maxlen == 7, changed("the batch queue's maxlen", "the processor's pacing")
        provider = TracerProvider()
        provider.add_span_processor(processor)
        provider.get_tracer("t").start_span("queued").end()
        assert len(queue) == 1, changed("where BatchSpanProcessor queues spans", "the processor's pacing")
    finally:
        processor.shutdown()
    assert internals.batch_queue(SimpleSpanProcessor(InMemorySpanExporter())) is None


def test_otlp_exporters_keep_their_endpoint() -> None:
    used_by = "plugin/export_accounting.py (naming where spans could not be exported)"
    http = HttpSpanExporter(endpoint="http://collector.example:4318/v1/traces")
    grpc = GrpcSpanExporter(endpoint="http://collector.example:4317", insecure=True)
    try:
        assert internals.exporter_endpoint(http) == "http://collector.example:4318/v1/traces", changed(
            "OTLPSpanExporter._endpoint (HTTP: the traces URL)", used_by
        )
        assert internals.exporter_endpoint(grpc) == "collector.example:4317", changed(
            "OTLPSpanExporter._endpoint (gRPC: host:port)", used_by
        )
    finally:
        http.shutdown()
        grpc.shutdown()


# -- the SDK span's layout: adapters/sdk_spans.py and plugin/enriched_span.py read it once per span -----------


def test_the_tracer_makes_spans_of_the_plain_layout(ended_span: ReadableSpan) -> None:
    used_by = "adapters/sdk_spans.py (the fast road of record_from_span)"
    assert hasattr(sdk_trace, "_Span"), changed("opentelemetry.sdk.trace._Span", used_by)
    assert type(ended_span) in internals.PLAIN_LAYOUT_SPAN_TYPES, changed(
        f"the type of the tracer's spans (now {type(ended_span).__qualname__})", used_by
    )


def test_span_fields_are_in_the_instance_dict_as_the_properties_return_them(ended_span: ReadableSpan) -> None:
    used_by = "adapters/sdk_spans.py (record_from_span reads a span's fields from its __dict__)"
    state = vars(ended_span)
    try:
        fields = internals.span_fields(state)
    except KeyError as missing:
        pytest.fail(changed(f"the span field {missing} in a span's __dict__", used_by))
    end, bounded, context, parent, name, start, kind, status, events, links, resource, scope = fields
    public = ended_span
    for field, raw, expected in [
        ("_end_time", end, public.end_time),
        ("_context", context, public.context),
        ("_parent", parent, public.parent),
        ("_name", name, public.name),
        ("_start_time", start, public.start_time),
        ("_kind", kind, public.kind),
        ("_status", status, public.status),
        ("_resource", resource, public.resource),
        ("_instrumentation_scope", scope, public.instrumentation_scope),
    ]:
        assert raw is expected, changed(f"the span field {field} (the value its property returns)", used_by)
    assert list(events) == list(public.events) and len(public.events) == 1, changed("the span field _events", used_by)
    assert list(links) == list(public.links) and len(public.links) == 1, changed("the span field _links", used_by)
    assert bounded is getattr(ended_span, internals.ATTRIBUTES_FIELD), changed("the span field _attributes", used_by)


def test_bounded_attributes_keep_a_plain_dict(ended_span: ReadableSpan) -> None:
    used_by = "adapters/sdk_spans.py and plugin/enriched_span.py (a span's attributes without a copy)"
    bounded = getattr(ended_span, internals.ATTRIBUTES_FIELD, None)
    inner = getattr(bounded, internals.BOUNDED_ATTRIBUTES_DICT, None)
    assert type(inner) is dict, changed("BoundedAttributes._dict (a plain dict)", used_by)
    assert inner == dict(ended_span.attributes or {}), changed("BoundedAttributes._dict (the attributes)", used_by)


def test_a_copy_of_the_instance_dict_with_plain_attributes_reads_like_the_span(ended_span: ReadableSpan) -> None:
    used_by = "plugin/enriched_span.py (EnrichedSpan.of copies a span's fields and replaces _attributes)"
    copy = object.__new__(ReadableSpan)
    for field, value in vars(ended_span).items():
        setattr(copy, field, value)
    setattr(copy, internals.ATTRIBUTES_FIELD, {"extra": 1, **dict(ended_span.attributes or {})})
    assert dict(copy.attributes or {}) == {"extra": 1, "gen_ai.operation.name": "chat"}, changed(
        "ReadableSpan.attributes (returns the _attributes field)", used_by
    )
    assert (copy.name, copy.context, copy.events, copy.links) == (
        ended_span.name,
        ended_span.context,
        ended_span.events,
        ended_span.links,
    ), changed("ReadableSpan's properties (return the fields of its __dict__)", used_by)
    assert (copy.dropped_events, copy.dropped_links) == (ended_span.dropped_events, ended_span.dropped_links), changed(
        "ReadableSpan.dropped_events/dropped_links (read the _events/_links fields)", used_by
    )


# -- the zero-code configurator: plugin/wiring.py extends the SDK's ----------------------------------------------


def test_the_sdk_configurator_has_the_hook_and_arguments_the_profiler_uses() -> None:
    used_by = "plugin/wiring.py (AgentProfilerConfigurator, run by opentelemetry-instrument)"
    configurator = getattr(sdk_configuration, "_OTelSDKConfigurator", None)
    assert configurator is internals.SdkConfigurator, changed(
        "opentelemetry.sdk._configuration._OTelSDKConfigurator", used_by
    )
    assert callable(getattr(configurator, "_configure", None)), changed("_OTelSDKConfigurator._configure", used_by)
    initialize = getattr(sdk_configuration, "_initialize_components", None)
    assert initialize is not None, changed("opentelemetry.sdk._configuration._initialize_components", used_by)
    parameters = inspect.signature(initialize).parameters
    takes_processors = "span_processors" in parameters and "export_span_processor" in parameters
    assert internals.SDK_SETUP_TAKES_SPAN_PROCESSORS is takes_processors
    # Older SDKs lack them (the configurator then wires in after the setup); from 1.40 on they are expected.
    if _sdk_version() >= (1, 40):
        for name in ("span_processors", "export_span_processor"):
            assert name in parameters, changed(f"the {name} argument of _initialize_components", used_by)


def _sdk_version() -> tuple[int, int]:
    major, minor = version("opentelemetry-sdk").split(".")[:2]
    return int(major), int(minor)
