"""Enriched span copies: the ``agent_profiler.*`` attributes equal what the analysis core computes,
and everything the original span carried reaches the exporter unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.core import PriceTable, SpanRecord, profile_records, profile_trace
from otel_agent_profiler.live import attributes as attr
from otel_agent_profiler.live.enrichment import span_attributes, trace_attributes
from otel_agent_profiler.plugin.config import _OPTIONS
from otel_agent_profiler.plugin.enriched_span import EnrichedSpan
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor
from tests.support.expected_attributes import expected_of

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
PREFIX = "agent_profiler."
CHUNK = "gen_ai.content.completion.chunk"
PRICES = {
    "gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
    "text-embedding-3-small": {"input": 0.02, "output": 0},
}

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "double": lambda v: isinstance(v, float),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, _ in _OPTIONS.values():
        monkeypatch.delenv(variable, raising=False)


class Pipeline:
    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.originals = InMemorySpanExporter()
        limits = options.pop("span_limits", None)
        resource = options.pop("resource", None)
        # Every attribute's value is checked here; the default ("essential") has its own tests.
        options.setdefault("span_attributes", "all")
        self.profiler = AgentProfilerSpanProcessor(
            downstream=[SimpleSpanProcessor(self.exporter)], metrics_enabled=False, **options
        )
        kwargs: dict[str, Any] = {"shutdown_on_exit": False}
        if limits is not None:
            kwargs["span_limits"] = limits
        if resource is not None:
            kwargs["resource"] = resource
        self.provider = TracerProvider(**kwargs)
        self.provider.add_span_processor(SimpleSpanProcessor(self.originals))
        self.provider.add_span_processor(self.profiler)
        self.tracer = self.provider.get_tracer("enrichment-test", "1.2.3", schema_url="https://example.com/schema")

    def run(self) -> tuple[dict[int, ReadableSpan], dict[int, ReadableSpan]]:
        assert self.profiler.force_flush(10_000)
        exported = self.exporter.get_finished_spans()
        originals = self.originals.get_finished_spans()
        assert len(exported) == len(originals)
        return {s.context.span_id: s for s in exported}, {s.context.span_id: s for s in originals}


@pytest.fixture
def pipeline() -> Iterator[Callable[..., Pipeline]]:
    made: list[Pipeline] = []

    def make(**options: Any) -> Pipeline:
        made.append(Pipeline(**options))
        return made[-1]

    yield make
    for item in made:
        item.provider.shutdown()


def ctx_of(span: Span) -> Context:
    return trace.set_span_in_context(span)


def varied_trace(tracer: trace.Tracer, base: int = T0) -> None:
    """One agent run touching every category, streaming, tokens, errors, events and links."""
    root = tracer.start_span(
        "invoke_agent travel",
        context=Context(),
        kind=SpanKind.SERVER,
        start_time=base,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel", "user.tier": "gold"},
    )
    llm = tracer.start_span(
        "chat gpt-4o",
        context=ctx_of(root),
        kind=SpanKind.CLIENT,
        start_time=base + 2 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 200,
            "gen_ai.usage.cache_read.input_tokens": 400,
            "gen_ai.usage.reasoning.output_tokens": 50,
            "gen_ai.input.messages": "plan a trip",
        },
    )
    llm.add_event(CHUNK, {"n": 1}, timestamp=base + 9 * MS)
    llm.add_event(CHUNK, {"n": 2}, timestamp=base + 15 * MS)
    llm.end(end_time=base + 30 * MS)
    embed = tracer.start_span(
        "embeddings text-embedding-3-small",
        context=ctx_of(root),
        start_time=base + 31 * MS,
        attributes={
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.usage.input_tokens": 50,
        },
    )
    embed.end(end_time=base + 34 * MS)
    retrieval = tracer.start_span(
        "retrieve hotels",
        context=ctx_of(root),
        start_time=base + 35 * MS,
        attributes={"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "hotels"},
    )
    retrieval.end(end_time=base + 45 * MS)
    memory = tracer.start_span(
        "load memory",
        context=ctx_of(root),
        start_time=base + 35 * MS,
        attributes={"db.system.name": "redis", "agent.memory.kind": "episodic"},
    )
    memory.end(end_time=base + 38 * MS)
    tool = tracer.start_span(
        "execute_tool book",
        context=ctx_of(root),
        start_time=base + 46 * MS,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book"},
        links=[Link(llm.get_span_context(), {"link.reason": "follows"})],
    )
    http = tracer.start_span("POST /book", context=ctx_of(tool), kind=SpanKind.CLIENT, start_time=base + 47 * MS)
    http.set_status(Status(StatusCode.ERROR, "502 from upstream"))
    http.record_exception(RuntimeError("upstream failed"), timestamp=base + 60 * MS)
    http.end(end_time=base + 70 * MS)
    tool.end(end_time=base + 75 * MS)
    answer = tracer.start_span(
        "chat gpt-4o answer",
        context=ctx_of(root),
        start_time=base + 76 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 300,
            "gen_ai.usage.output_tokens": 80,
        },
    )
    answer.end(end_time=base + 95 * MS)
    root.set_status(Status(StatusCode.OK))
    root.end(end_time=base + 100 * MS)


def assert_equal_to_core(
    exported: dict[int, ReadableSpan],
    originals: Sequence[ReadableSpan],
    *,
    complete: bool = True,
    prices: PriceTable | None = None,
) -> None:
    profiles = profile_records(records_from_spans(originals), prices=prices)
    checked = 0
    for profile in profiles:
        for span_id, values in expected_of(profile, complete).items():
            actual = exported[int(span_id, 16)].attributes
            assert {key: actual.get(key) for key in values} == values, exported[int(span_id, 16)].name
            checked += 1
    assert checked == len(exported)


# -- values ---------------------------------------------------------------------------------------


def test_exported_values_equal_the_cores_profile(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline()
    varied_trace(p.tracer)
    varied_trace(p.tracer, base=T0 + 10_000 * MS)
    exported, originals = p.run()
    assert len(exported) == 16
    assert_equal_to_core(exported, list(originals.values()))


def test_exported_values_with_prices_equal_the_cores_profile(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline(prices=PRICES)
    varied_trace(p.tracer)
    exported, originals = p.run()
    assert_equal_to_core(exported, list(originals.values()), prices=PriceTable.from_mapping(PRICES))
    by_name = {s.name: s for s in exported.values()}
    first = (600 * 2.5 + 400 * 1.25 + 200 * 10.0) / 1e6
    answer = (300 * 2.5 + 80 * 10.0) / 1e6  # a dated snapshot is priced as its alias
    embedding = 50 * 0.02 / 1e6
    assert by_name["chat gpt-4o"].attributes[attr.COST_USD] == pytest.approx(first)
    assert by_name["chat gpt-4o answer"].attributes[attr.COST_USD] == pytest.approx(answer)
    assert by_name["embeddings text-embedding-3-small"].attributes[attr.COST_USD] == pytest.approx(embedding)
    root = by_name["invoke_agent travel"]
    assert root.attributes[attr.TRACE_COST_USD] == pytest.approx(first + answer + embedding)
    for name in ("execute_tool book", "POST /book", "retrieve hotels", "load memory"):
        assert attr.COST_USD not in by_name[name].attributes


def _exported_profile_attributes(
    pipeline: Callable[..., Pipeline], **options: Any
) -> list[tuple[bool, dict[str, Any], dict[str, Any]]]:
    """For each span of a priced varied trace: whether it is a root, its exported ``agent_profiler.*``
    attributes and all those the documentation lists for it."""
    p = pipeline(prices=PRICES, **options)
    varied_trace(p.tracer)
    exported, originals = p.run()
    spans = []
    for profile in profile_records(
        records_from_spans(list(originals.values())), prices=PriceTable.from_mapping(PRICES)
    ):
        roots = {root.span_id for root in profile.roots}
        for span_id, values in expected_of(profile, True).items():
            actual = exported[int(span_id, 16)].attributes or {}
            spans.append((span_id in roots, {k: v for k, v in actual.items() if k.startswith(PREFIX)}, values))
    return spans


def test_by_default_only_roots_get_every_attribute_and_other_spans_the_essential_ones(
    pipeline: Callable[..., Pipeline],
) -> None:
    # None: the option left to its environment variable (cleared here), then the default.
    spans = _exported_profile_attributes(pipeline, span_attributes=None)
    assert sum(is_root for is_root, _, _ in spans) == 1 and len(spans) == 8
    for is_root, actual, documented in spans:
        if is_root:
            assert actual == documented
        else:
            assert actual == {k: v for k, v in documented.items() if k in attr.ESSENTIAL_SPAN_ATTRIBUTES}
            assert attr.OPERATION not in actual and attr.CRITICAL_PATH_MS in actual
    # The essential set includes a priced call's cost, which the offline analysis reads back.
    assert any(attr.COST_USD in actual for is_root, actual, _ in spans if not is_root)


def test_span_attributes_all_in_the_environment_puts_every_attribute_on_every_span(
    pipeline: Callable[..., Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_AGENT_PROFILER_SPAN_ATTRIBUTES", "all")
    for _, actual, documented in _exported_profile_attributes(pipeline, span_attributes=None):
        assert actual == documented


def test_known_values_of_a_small_trace(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline()
    root = p.tracer.start_span(
        "invoke_agent a", context=Context(), start_time=T0, attributes={"gen_ai.operation.name": "invoke_agent"}
    )
    llm = p.tracer.start_span(
        "chat m",
        context=ctx_of(root),
        start_time=T0 + 10 * MS,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.is_streaming": True},
    )
    llm.add_event(CHUNK, timestamp=T0 + 25 * MS)
    llm.end(end_time=T0 + 50 * MS)
    tool = p.tracer.start_span(
        "execute_tool search",
        context=ctx_of(root),
        start_time=T0 + 50 * MS,
        attributes={"gen_ai.operation.name": "execute_tool"},
    )
    tool.end(end_time=T0 + 95 * MS)
    side = p.tracer.start_span("side", context=ctx_of(root), start_time=T0 + 52 * MS)
    side.end(end_time=T0 + 60 * MS)
    root.end(end_time=T0 + 100 * MS)
    exported, _ = p.run()
    by_name = {s.name: s.attributes for s in exported.values()}
    assert by_name["chat m"][attr.CATEGORY] == "llm"
    assert by_name["chat m"][attr.OPERATION] == "m"
    assert by_name["chat m"][attr.SELF_TIME_MS] == pytest.approx(40.0)
    assert by_name["chat m"][attr.TIME_TO_FIRST_TOKEN_MS] == pytest.approx(15.0)
    assert by_name["execute_tool search"][attr.OPERATION] == "search"
    assert by_name["execute_tool search"][attr.CRITICAL_PATH_MS] == pytest.approx(45.0)
    assert by_name["side"][attr.ON_CRITICAL_PATH] is False
    assert by_name["side"][attr.CRITICAL_PATH_MS] == 0.0
    assert by_name["side"][attr.CATEGORY] == "internal"
    r = by_name["invoke_agent a"]
    assert r[attr.SELF_TIME_MS] == pytest.approx(15.0)
    assert r[attr.CRITICAL_PATH_MS] == pytest.approx(15.0)
    assert r[attr.ON_CRITICAL_PATH] is True
    assert r[attr.TRACE_DURATION_MS] == pytest.approx(100.0)
    assert r[attr.TRACE_CRITICAL_PATH_MS] == pytest.approx(100.0)
    assert r[attr.TRACE_SPAN_COUNT] == 4
    assert r[attr.TRACE_LLM_CALLS] == 1
    assert r[attr.TRACE_COMPLETE] is True
    assert r[attr.TRACE_ANOMALIES] == 0
    assert r[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + "llm"] == pytest.approx(40.0)
    assert r[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + "tool"] == pytest.approx(45.0)
    assert r[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + "agent"] == pytest.approx(15.0)
    assert r[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + "internal"] == 0.0
    assert r[attr.BOTTLENECK_OPERATION] == "search"
    assert r[attr.BOTTLENECK_CATEGORY] == "tool"
    assert r[attr.BOTTLENECK_CRITICAL_PATH_MS] == pytest.approx(45.0)
    assert r[attr.BOTTLENECK_SHARE] == pytest.approx(0.45)


def test_attribute_types_match_the_documented_table(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline(prices=PRICES)
    varied_trace(p.tracer)
    exported, _ = p.run()
    documented = {**attr.SPAN_ATTRIBUTES, **attr.ROOT_ATTRIBUTES}
    seen: set[str] = set()
    for span in exported.values():
        for key, value in span.attributes.items():
            if not key.startswith(PREFIX):
                continue
            assert key in documented, f"undocumented attribute {key}"
            kind = documented[key][0]
            assert _TYPES[kind](value), f"{key}={value!r} is not a {kind}"
            seen.add(key)
    # Every documented attribute shows up on this trace (it has streaming, prices, a bottleneck),
    # but the LLM phases, which need an inference server's span (tests/test_call_anatomy_live.py),
    # and the server's load, which needs its metrics polled (tests/live/test_backend_load_live.py).
    assert seen == set(documented) - set(attr.LLM_PHASE_ATTRIBUTES) - set(attr.BACKEND_ATTRIBUTES)


def test_every_span_has_the_span_attributes_and_only_roots_the_totals(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline()
    varied_trace(p.tracer)
    exported, _ = p.run()
    required = set(attr.SPAN_ATTRIBUTES) - {
        attr.TIME_TO_FIRST_TOKEN_MS,
        attr.COST_USD,
        attr.CONTEXT_WINDOW_USE,
        *attr.LLM_PHASE_ATTRIBUTES,
        *attr.BACKEND_ATTRIBUTES,
    }
    required_root = set(attr.ROOT_ATTRIBUTES) - {attr.TRACE_COST_USD, attr.TRACE_CRITICAL_PATH_COST_USD}
    for span in exported.values():
        keys = set(span.attributes)
        assert required <= keys, span.name
        if span.parent is None:
            assert required_root <= keys
        else:
            assert not keys & set(attr.ROOT_ATTRIBUTES), span.name
    with_ttft = [s.name for s in exported.values() if attr.TIME_TO_FIRST_TOKEN_MS in s.attributes]
    assert with_ttft == ["chat gpt-4o"]


def test_every_local_root_carries_the_totals(pipeline: Callable[..., Pipeline]) -> None:
    # A trace whose root's parent is remote and which has a second, parentless fragment.
    p = pipeline()
    remote = trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    root = p.tracer.start_span("server", context=trace.set_span_in_context(trace.NonRecordingSpan(remote)))
    child = p.tracer.start_span("child", context=ctx_of(root))
    child.end()
    root.end()
    exported, originals = p.run()
    by_name = {s.name: s for s in exported.values()}
    assert by_name["server"].attributes[attr.TRACE_SPAN_COUNT] == 2
    assert by_name["server"].attributes[attr.TRACE_COMPLETE] is True
    assert attr.TRACE_SPAN_COUNT not in by_name["child"].attributes
    assert_equal_to_core(exported, list(originals.values()))


# -- the originals are kept ---------------------------------------------------------------------


def test_everything_of_the_original_is_kept(pipeline: Callable[..., Pipeline]) -> None:
    limits = SpanLimits(max_span_attributes=4, max_events=2, max_links=1)
    resource = Resource.create({"service.name": "travel-agent", "deployment.environment": "test"})
    p = pipeline(span_limits=limits, resource=resource)
    root = p.tracer.start_span("root", context=Context(), kind=SpanKind.SERVER, start_time=T0)
    other = p.tracer.start_span("other", context=Context())
    span = p.tracer.start_span(
        "work",
        context=ctx_of(root),
        kind=SpanKind.PRODUCER,
        start_time=T0 + MS,
        attributes={"a": 1, "b": "two", "c": [1, 2, 3], "d": True, "e": 5.5, "f": "dropped"},
        links=[
            Link(other.get_span_context(), {"why": "batch"}),
            Link(root.get_span_context(), {"why": "dropped"}),
        ],
    )
    for n in range(4):
        span.add_event(f"event {n}", {"n": n}, timestamp=T0 + (2 + n) * MS)
    span.set_status(Status(StatusCode.ERROR, "it broke"))
    span.end(end_time=T0 + 9 * MS)
    root.end(end_time=T0 + 10 * MS)
    other.end()
    exported, originals = p.run()
    original = originals[span.get_span_context().span_id]
    copy = exported[span.get_span_context().span_id]
    assert original.dropped_attributes == 2 and original.dropped_events == 2 and original.dropped_links == 1
    assert isinstance(copy, ReadableSpan)
    assert copy is not original
    assert copy.name == original.name
    assert copy.context == original.context
    assert copy.parent == original.parent
    assert copy.kind is SpanKind.PRODUCER
    assert copy.status.status_code is StatusCode.ERROR and copy.status.description == "it broke"
    assert (copy.start_time, copy.end_time) == (original.start_time, original.end_time)
    assert copy.resource is original.resource
    assert copy.resource.attributes["service.name"] == "travel-agent"
    assert copy.instrumentation_scope == original.instrumentation_scope
    assert copy.instrumentation_scope.version == "1.2.3"
    assert copy.instrumentation_scope.schema_url == "https://example.com/schema"
    assert [(e.name, dict(e.attributes), e.timestamp) for e in copy.events] == [
        (e.name, dict(e.attributes), e.timestamp) for e in original.events
    ]
    assert [(link.context, dict(link.attributes)) for link in copy.links] == [
        (link.context, dict(link.attributes)) for link in original.links
    ]
    assert (copy.dropped_attributes, copy.dropped_events, copy.dropped_links) == (2, 2, 1)
    for key, value in original.attributes.items():
        assert copy.attributes[key] == value
    assert set(copy.attributes) - set(original.attributes) == {key for key in copy.attributes if key.startswith(PREFIX)}
    assert copy.attributes[attr.CATEGORY] == "internal"


def test_original_agent_profiler_attributes_win(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline()
    root = p.tracer.start_span("root", context=Context(), start_time=T0)
    custom = p.tracer.start_span(
        "custom",
        context=ctx_of(root),
        start_time=T0 + MS,
        attributes={"agent_profiler.category": "my-own-label", "agent_profiler.self_time_ms": "user data"},
    )
    custom.end(end_time=T0 + 5 * MS)
    forced = p.tracer.start_span(
        "forced", context=ctx_of(root), start_time=T0 + 5 * MS, attributes={"agent_profiler.category": "tool"}
    )
    forced.end(end_time=T0 + 8 * MS)
    root.end(end_time=T0 + 10 * MS)
    exported, originals = p.run()
    by_name = {s.name: s for s in exported.values()}
    assert by_name["custom"].attributes["agent_profiler.category"] == "my-own-label"
    assert by_name["custom"].attributes["agent_profiler.self_time_ms"] == "user data"
    # The profile attributes the original did not set are still added.
    assert by_name["custom"].attributes[attr.CRITICAL_PATH_MS] == pytest.approx(4.0)
    assert by_name["custom"].attributes[attr.OPERATION] == "custom"
    # An explicit category decides the classification, and stays as the user set it.
    assert by_name["forced"].attributes["agent_profiler.category"] == "tool"
    assert by_name["root"].attributes[attr.TRACE_CATEGORY_CRITICAL_PATH_PREFIX + "tool"] == pytest.approx(3.0)
    profile = profile_records(records_from_spans(originals.values()))[0]
    assert {s.name: s.category for s in profile.spans}["forced"] == "tool"
    # The originals never changed.
    for span in originals.values():
        if span.name == "custom":
            assert dict(span.attributes) == {
                "agent_profiler.category": "my-own-label",
                "agent_profiler.self_time_ms": "user data",
            }
        elif span.name == "forced":
            assert dict(span.attributes) == {"agent_profiler.category": "tool"}
        else:
            assert dict(span.attributes) == {}


def test_enriched_spans_serialize_like_any_span(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline(prices=PRICES)
    varied_trace(p.tracer)
    exported, _ = p.run()
    request = encode_spans(list(exported.values()))
    encoded = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert len(encoded) == len(exported)
    for span in encoded:
        keys = {kv.key for kv in span.attributes}
        assert attr.SELF_TIME_MS in keys
    for span in exported.values():
        document = json.loads(span.to_json())
        assert document["attributes"][attr.CATEGORY] == span.attributes[attr.CATEGORY]


# -- the building blocks ----------------------------------------------------------------------


def _records() -> list[SpanRecord]:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    return [
        SpanRecord(trace_id, "00000000000000a1", None, "root", 0, 100 * MS),
        SpanRecord(
            trace_id,
            "00000000000000b2",
            "00000000000000a1",
            "chat m",
            10 * MS,
            70 * MS,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5,
            },
        ),
    ]


def test_span_attributes_of_a_span_profile() -> None:
    profile = profile_trace(_records(), prices=PriceTable.from_mapping({"m": {"input": 1, "output": 2}}))
    llm = next(s for s in profile.spans if s.name == "chat m")
    assert span_attributes(llm) == {
        attr.CATEGORY: "llm",
        attr.OPERATION: "m",
        attr.SELF_TIME_MS: 60.0,
        attr.CRITICAL_PATH_MS: 60.0,
        attr.ON_CRITICAL_PATH: True,
        attr.COST_USD: pytest.approx((10 * 1 + 5 * 2) / 1e6),
    }


def test_trace_attributes_of_a_trace_profile() -> None:
    profile = profile_trace(_records())
    values = trace_attributes(profile, complete=False)
    assert values[attr.TRACE_COMPLETE] is False
    assert values[attr.TRACE_DURATION_MS] == 100.0
    assert values[attr.TRACE_CRITICAL_PATH_MS] == 100.0
    assert values[attr.TRACE_SPAN_COUNT] == 2
    assert values[attr.TRACE_LLM_CALLS] == 1
    assert values[attr.TRACE_TOKENS_PREFIX + "input"] == 10
    assert values[attr.TRACE_CRITICAL_PATH_TOKENS_PREFIX + "output"] == 5
    assert values[attr.BOTTLENECK_OPERATION] == "m"
    assert values[attr.BOTTLENECK_SHARE] == pytest.approx(0.6)
    assert attr.TRACE_COST_USD not in values
    assert trace_attributes(profile, complete=True)[attr.TRACE_COMPLETE] is True


def test_enriched_span_unit() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("t").start_span("s", attributes={"keep": 1, "agent_profiler.category": "mine"})
    span.add_event("e")
    span.end()
    (original,) = exporter.get_finished_spans()
    copy = EnrichedSpan(original, {"agent_profiler.category": "llm", "agent_profiler.extra": 2.5})
    assert dict(copy.attributes) == {"keep": 1, "agent_profiler.category": "mine", "agent_profiler.extra": 2.5}
    assert dict(original.attributes) == {"keep": 1, "agent_profiler.category": "mine"}
    assert copy.events == original.events
    assert copy.context == original.context
    provider.shutdown()
