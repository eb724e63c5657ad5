"""Profile metrics, read back through a real ``MeterProvider`` with an ``InMemoryMetricReader``.

Values are checked against the analysis core's profile of the same spans; attribute values are
checked to stay low-cardinality and free of ids and prompt or completion text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Metric, Sum
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.core import (
    PriceTable,
    SpanEvent,
    SpanRecord,
    TraceProfile,
    profile_records,
    profile_trace as core_profile_trace,
)
from otel_agent_profiler.core.pricing import with_built_in_prices
from otel_agent_profiler.live import profile_metrics as pm
from otel_agent_profiler.live.profile_metrics import OperationNames, ProfileMetrics
from otel_agent_profiler.plugin.config import _OPTIONS
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor
from tests.support.id_generators import FixedTraceIds

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
CHUNK = "gen_ai.content.completion.chunk"
SECRET_PROMPT = "PROMPT-7f3a9c-please-book-me-a-flight-to-Lisbon"
SECRET_COMPLETION = "COMPLETION-d41e2b-your-flight-is-booked"
PRICES = {"gpt-4o": {"input": 2.5, "output": 10.0}}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, _ in _OPTIONS.values():
        monkeypatch.delenv(variable, raising=False)


class Rig:
    def __init__(self, downstream: bool = True, id_generator: IdGenerator | None = None, **options: Any) -> None:
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.exporter = InMemorySpanExporter()
        self.originals = InMemorySpanExporter()
        self.profiler = AgentProfilerSpanProcessor(
            downstream=[SimpleSpanProcessor(self.exporter)] if downstream else [],
            meter_provider=self.meter_provider,
            **options,
        )
        kwargs: dict[str, Any] = {"shutdown_on_exit": False}
        if id_generator is not None:
            kwargs["id_generator"] = id_generator
        self.provider = TracerProvider(**kwargs)
        self.provider.add_span_processor(SimpleSpanProcessor(self.originals))
        self.provider.add_span_processor(self.profiler)
        self.tracer = self.provider.get_tracer("metrics-test")

    def flush(self) -> None:
        assert self.profiler.force_flush(10_000) is True

    def metrics(self) -> dict[str, Metric]:
        data = self.reader.get_metrics_data()
        if data is None:
            return {}
        found: dict[str, Metric] = {}
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    assert metric.name not in found
                    found[metric.name] = metric
        return found

    def profiles(self, prices: PriceTable | None = None) -> list[TraceProfile]:
        return profile_records(records_from_spans(self.originals.get_finished_spans()), prices=prices)


@pytest.fixture
def make_rig() -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(**options: Any) -> Rig:
        rigs.append(Rig(**options))
        return rigs[-1]

    yield make
    for rig in rigs:
        rig.provider.shutdown()
        rig.meter_provider.shutdown()


def ctx_of(span: Span) -> Context:
    return trace.set_span_in_context(span)


def agent_trace(tracer: trace.Tracer, base: int = T0, *, tool: str = "search") -> None:
    root = tracer.start_span(
        "invoke_agent planner",
        context=Context(),
        start_time=base,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    )
    llm = tracer.start_span(
        "chat gpt-4o",
        context=ctx_of(root),
        start_time=base + 5 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 40,
            "gen_ai.input.messages": f'[{{"role": "user", "content": "{SECRET_PROMPT}"}}]',
            "gen_ai.output.messages": f'[{{"role": "assistant", "content": "{SECRET_COMPLETION}"}}]',
            "gen_ai.prompt": SECRET_PROMPT,
            "gen_ai.completion": SECRET_COMPLETION,
        },
    )
    llm.add_event(CHUNK, {"gen_ai.content": SECRET_COMPLETION}, timestamp=base + 17 * MS)
    llm.add_event(CHUNK, timestamp=base + 25 * MS)
    llm.end(end_time=base + 40 * MS)
    tool_span = tracer.start_span(
        f"execute_tool {tool}",
        context=ctx_of(root),
        start_time=base + 45 * MS,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": SECRET_PROMPT,
        },
    )
    tool_span.end(end_time=base + 80 * MS)
    side = tracer.start_span(
        "retrieve kb",
        context=ctx_of(root),
        start_time=base + 45 * MS,
        attributes={"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb"},
    )
    side.end(end_time=base + 60 * MS)
    second = tracer.start_span(
        "chat gpt-4o again",
        context=ctx_of(root),
        start_time=base + 81 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 300,
            "gen_ai.usage.output_tokens": 60,
        },
    )
    second.end(end_time=base + 95 * MS)
    root.end(end_time=base + 100 * MS)


def points(metric: Metric) -> list[Any]:
    return list(metric.data.data_points)


def by_attributes(metric: Metric, *keys: str) -> dict[tuple[Any, ...], Any]:
    result: dict[tuple[Any, ...], Any] = {}
    for point in points(metric):
        key = tuple(point.attributes.get(k) for k in keys)
        assert key not in result
        result[key] = point
    return result


def outcomes(rig: Rig, name: str = pm.SPANS) -> dict[str, int]:
    metric = rig.metrics().get(name)
    if metric is None:
        return {}
    return {p.attributes["agent_profiler.outcome"]: p.value for p in points(metric)}


# -- values ---------------------------------------------------------------------------------------


def test_operation_totals_sum_each_operations_spans_over_traces(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    for n in range(3):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS, tool=f"tool{n % 2}")
    rig.flush()
    profiles = rig.profiles()
    metrics = rig.metrics()
    for name, field in ((pm.SELF_TIME, "self_time_ns"), (pm.CRITICAL_PATH_TIME, "critical_path_ns")):
        expected: dict[tuple[str, str], int] = defaultdict(int)
        for profile in profiles:
            for span in profile.spans:
                expected[(span.category, span.operation)] += getattr(span, field)
        metric = metrics[name]
        assert metric.unit == "s"
        assert isinstance(metric.data, Sum) and metric.data.is_monotonic
        actual = by_attributes(metric, "agent_profiler.category", "agent_profiler.operation")
        assert set(actual) == set(expected)
        for key, total in expected.items():
            assert actual[key].value == pytest.approx(total / 1e9), (name, key)
    # The tools alternate, so each tool's total holds its own traces only.
    tools = by_attributes(metrics[pm.SELF_TIME], "agent_profiler.category", "agent_profiler.operation")
    assert tools[("tool", "tool0")].value == pytest.approx(2 * 0.035)
    assert tools[("tool", "tool1")].value == pytest.approx(0.035)
    # The critical-path times of a trace's operations add up to its critical path.
    critical = sum(point.value for point in points(metrics[pm.CRITICAL_PATH_TIME]))
    assert critical == pytest.approx(sum(p.critical_path_ns for p in profiles) / 1e9)


def test_running_totals_are_exact_in_nanoseconds_over_many_traces() -> None:
    totals = pm.RunningTotals(("k",), scale=1e-9)
    for _ in range(100_000):
        totals.add(((("a",), 1),))
    (observation,) = totals.observe(CallbackOptions())
    # Added as seconds, these one-nanosecond values would sum to 0.00010000000000013679.
    assert observation.value == 100_000 * 1e-9
    assert observation.attributes == {"k": "a"}


def test_trace_duration_histogram_matches_the_profiles(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    for n in range(3):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    profiles = rig.profiles()
    duration = rig.metrics()[pm.TRACE_DURATION]
    assert duration.unit == "s"
    assert isinstance(duration.data, Histogram)
    (point,) = points(duration)
    assert point.attributes == {"agent_profiler.root_operation": "planner"}
    assert point.count == 3
    assert point.sum == pytest.approx(sum(p.duration_ns for p in profiles) / 1e9)


def test_critical_path_tokens_match_the_profiles(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    for n in range(2):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    profiles = rig.profiles()
    metric = rig.metrics()[pm.CRITICAL_PATH_TOKENS]
    assert metric.unit == "{token}"
    assert isinstance(metric.data, Sum) and metric.data.is_monotonic
    tokens = by_attributes(metric, "agent_profiler.root_operation", "gen_ai.token.type")
    assert set(tokens) == {("planner", "input"), ("planner", "output")}
    assert tokens[("planner", "input")].value == sum(p.critical_path_tokens.input for p in profiles)
    assert tokens[("planner", "output")].value == sum(p.critical_path_tokens.output for p in profiles)
    assert tokens[("planner", "input")].value == 2 * (120 + 300)


def test_time_to_first_chunk_for_streaming_llm_spans(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    for n in range(2):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    metric = rig.metrics()[pm.TIME_TO_FIRST_CHUNK]
    assert metric.unit == "s"
    (point,) = points(metric)  # only the first LLM call streamed
    assert point.count == 2
    assert point.sum == pytest.approx(2 * 0.012)
    assert point.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.provider.name": "openai",
        "agent_profiler.on_critical_path": True,
    }


def test_time_to_first_chunk_counts_a_nested_duplicate_call_once(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5}
    outer = rig.tracer.start_span("outer chat", context=Context(), start_time=T0, attributes={**attributes})
    inner = rig.tracer.start_span("inner chat", context=ctx_of(outer), start_time=T0 + MS, attributes=attributes)
    for span in (outer, inner):
        span.add_event(CHUNK, timestamp=T0 + 4 * MS)
    inner.end(end_time=T0 + 9 * MS)
    outer.end(end_time=T0 + 10 * MS)
    rig.flush()
    (point,) = points(rig.metrics()[pm.TIME_TO_FIRST_CHUNK])
    assert point.count == 1


def test_cost_total_with_prices(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(prices=PRICES)
    agent_trace(rig.tracer)
    rig.flush()
    (profile,) = rig.profiles(PriceTable.from_mapping(PRICES))
    (point,) = points(rig.metrics()[pm.CRITICAL_PATH_COST])
    assert profile.critical_path_cost_usd is not None
    assert point.value == pytest.approx(profile.critical_path_cost_usd)
    assert point.attributes == {"agent_profiler.root_operation": "planner"}


def test_cost_total_with_the_built_in_prices_by_default(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent_trace(rig.tracer)
    rig.flush()
    (profile,) = rig.profiles(with_built_in_prices(None))
    (point,) = points(rig.metrics()[pm.CRITICAL_PATH_COST])
    assert profile.critical_path_cost_usd
    assert point.value == pytest.approx(profile.critical_path_cost_usd)


def test_no_cost_total_when_pricing_is_off(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(prices={})
    agent_trace(rig.tracer)
    rig.flush()
    assert pm.CRITICAL_PATH_COST not in rig.metrics()


def test_counters_by_outcome(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent_trace(rig.tracer)
    agent_trace(rig.tracer, base=T0 + 1000 * MS)
    # A flush leaves a running trace held: its spans count once, when it completes.
    running = rig.tracer.start_span("running", context=Context())
    running_child = rig.tracer.start_span("running child", context=ctx_of(running))
    running_child.end()
    rig.flush()
    running.end()
    rig.flush()
    # The flush at exit profiles a running trace with what ended: its later spans are late.
    pending = rig.tracer.start_span("pending", context=Context())
    child = rig.tracer.start_span("pending child", context=ctx_of(pending))
    child.end()
    assert rig.profiler.flush_at_exit(10_000) is True
    pending.end()
    rig.flush()
    metrics = rig.metrics()
    assert isinstance(metrics[pm.SPANS].data, Sum) and metrics[pm.SPANS].data.is_monotonic
    assert isinstance(metrics[pm.TRACES].data, Sum) and metrics[pm.TRACES].data.is_monotonic
    assert metrics[pm.SPANS].unit == "{span}"
    assert metrics[pm.TRACES].unit == "{trace}"
    assert outcomes(rig) == {"profiled": 13, "unprofiled_late": 1}
    assert outcomes(rig, pm.TRACES) == {"complete": 3, "flushed": 1}


# Trace ids whose low 64 bits put them first in (0x0...) or last out of (0xF...) any sample.
SAMPLED_ID = (0x1234 << 64) | 0x0000_0000_0000_0001
UNSAMPLED_ID = (0x5678 << 64) | 0xFFFF_FFFF_FFFF_FFF0


def test_every_span_is_counted_once_with_sampling(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(sample_rate=0.5, id_generator=FixedTraceIds([SAMPLED_ID, UNSAMPLED_ID]))
    span = rig.tracer.start_span("profiled", context=Context())
    span.end()
    rig.flush()
    span = rig.tracer.start_span("sampled out", context=Context())
    span.end()
    rig.flush()
    exported = rig.exporter.get_finished_spans()
    assert len(exported) == 2
    assert outcomes(rig) == {"profiled": 1, "sampled_out": 1}


def test_sampled_out_spans_are_counted_even_when_nothing_is_profiled(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(sample_rate=0)
    agent_trace(rig.tracer)
    rig.flush()
    assert len(rig.exporter.get_finished_spans()) == 5
    assert outcomes(rig) == {"sampled_out": 5}


# -- bounded and private attribute values -------------------------------------------------------


def test_operation_names_beyond_the_cap_become_other(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_operations=3)
    root = rig.tracer.start_span("run", context=Context(), start_time=T0)
    for n in range(6):
        tool = rig.tracer.start_span(
            f"execute_tool t{n}",
            context=ctx_of(root),
            start_time=T0 + (n * 10 + 1) * MS,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{n}"},
        )
        tool.end(end_time=T0 + (n * 10 + 9) * MS)
    root.end(end_time=T0 + 100 * MS)
    rig.flush()
    metric = rig.metrics()[pm.SELF_TIME]
    seen = by_attributes(metric, "agent_profiler.operation")
    assert set(seen) == {("run",), ("t0",), ("t1",), ("other",)}
    # Nothing is lost by the cap: the four operations past it add up in "other".
    (profile,) = rig.profiles()
    others = [s for s in profile.spans if s.operation not in ("run", "t0", "t1")]
    assert len(others) == 4
    assert seen[("other",)].value == pytest.approx(sum(s.self_time_ns for s in others) / 1e9)
    assert sum(p.value for p in seen.values()) == pytest.approx(sum(s.self_time_ns for s in profile.spans) / 1e9)
    # Later traces keep using the names already admitted, and map new ones to other.
    agent_trace(rig.tracer, base=T0 + 1000 * MS)
    rig.flush()
    for name in (pm.SELF_TIME, pm.CRITICAL_PATH_TIME):
        operations = {p.attributes["agent_profiler.operation"] for p in points(rig.metrics()[name])}
        assert operations == {"run", "t0", "t1", "other"}
    roots = {p.attributes["agent_profiler.root_operation"] for p in points(rig.metrics()[pm.TRACE_DURATION])}
    assert roots == {"run", "other"}
    models = {p.attributes["gen_ai.request.model"] for p in points(rig.metrics()[pm.TIME_TO_FIRST_CHUNK])}
    assert models == {"other"}


def test_operation_names_unit() -> None:
    names = OperationNames(2)
    assert [names(n) for n in ("a", "b", "c", "a", "b", "d")] == ["a", "b", "other", "a", "b", "other"]


def test_no_metric_attribute_carries_ids_or_content(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(prices=PRICES)
    for n in range(3):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    pending = rig.tracer.start_span("pending", context=Context())
    pending_child = rig.tracer.start_span("pending child", context=ctx_of(pending))
    pending_child.end()
    rig.flush()
    pending.end()
    rig.flush()
    spans: list[ReadableSpan] = list(rig.originals.get_finished_spans())
    forbidden = {SECRET_PROMPT, SECRET_COMPLETION, "Lisbon", "7f3a9c", "d41e2b"}
    for span in spans:
        context = span.context
        forbidden |= {
            f"{context.trace_id:032x}",
            f"{context.span_id:016x}",
            str(context.trace_id),
            str(context.span_id),
            f"{context.trace_id:x}",
            f"{context.span_id:x}",
        }
    metrics = rig.metrics()
    assert metrics
    hex_id = re.compile(r"\b(?:0x)?[0-9a-f]{16}(?:[0-9a-f]{16})?\b")
    for metric in metrics.values():
        for point in points(metric):
            for key, value in point.attributes.items():
                text = str(value)
                for bad in forbidden:
                    assert bad not in text, f"{metric.name} {key}={text!r}"
                assert not hex_id.search(text), f"{metric.name} {key}={text!r}"


def test_metric_attribute_keys_are_the_documented_ones(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(prices=PRICES)
    for n in range(2):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    metrics = rig.metrics()
    emitted = {name for name in metrics if name.startswith(("agent_profiler", "gen_ai"))}
    assert emitted == set(pm.METRICS)
    for name, metric in metrics.items():
        instrument, unit, keys = pm.METRICS[name]
        assert metric.unit == unit
        assert isinstance(metric.data, Histogram if instrument == "histogram" else Sum)
        for point in points(metric):
            assert set(point.attributes) <= set(keys), (name, set(point.attributes))


# -- options ------------------------------------------------------------------------------------


def test_metrics_disabled_records_nothing(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(metrics_enabled=False, max_spans_per_trace=2)
    agent_trace(rig.tracer)
    agent_trace(rig.tracer, base=T0 + 1000 * MS)
    rig.flush()
    assert len(rig.exporter.get_finished_spans()) == 10
    assert rig.metrics() == {}


def test_metrics_are_recorded_when_spans_are_not_enriched(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(enrich_spans=False)
    agent_trace(rig.tracer)
    rig.flush()
    assert not any(
        k.startswith("agent_profiler.") for s in rig.exporter.get_finished_spans() for k in s.attributes or {}
    )
    metrics = rig.metrics()
    assert points(metrics[pm.SELF_TIME])
    assert outcomes(rig, pm.TRACES) == {"complete": 1}


def test_profiling_only_mode_without_downstream(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(downstream=False)
    agent_trace(rig.tracer)
    rig.flush()
    assert rig.exporter.get_finished_spans() == ()
    assert len(rig.originals.get_finished_spans()) == 5
    (point,) = points(rig.metrics()[pm.TRACE_DURATION])
    assert point.count == 1


# -- ProfileMetrics on its own -------------------------------------------------------------------


def test_profile_metrics_record_a_profile_directly() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        trace_id = "0af7651916cd43dd8448eb211c80319c"
        records = [
            SpanRecord(trace_id, "00000000000000a1", None, "root", 0, 100 * MS),
            SpanRecord(
                trace_id,
                "00000000000000b2",
                "00000000000000a1",
                "chat",
                10 * MS,
                60 * MS,
                attributes={
                    "gen_ai.operation.name": "text_completion",
                    "gen_ai.request.model": "m",
                    "gen_ai.system": "acme",
                    "gen_ai.usage.input_tokens": 7,
                    "gen_ai.usage.output_tokens": 3,
                },
                events=(SpanEvent(CHUNK, 30 * MS),),
            ),
        ]
        metrics = ProfileMetrics(provider, max_operations=10)
        metrics.record(core_profile_trace(records))
        metrics.count_spans("profiled", 2)
        metrics.count_spans("nothing", 0)
        metrics.count_trace("complete")
        data = reader.get_metrics_data()
        assert data is not None
        found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        (ttft,) = points(found[pm.TIME_TO_FIRST_CHUNK])
        assert ttft.sum == pytest.approx(0.02)
        assert ttft.attributes == {
            "gen_ai.operation.name": "text_completion",
            "gen_ai.request.model": "m",
            "gen_ai.provider.name": "acme",
            "agent_profiler.on_critical_path": True,
        }
        assert {p.attributes["agent_profiler.outcome"]: p.value for p in points(found[pm.SPANS])} == {"profiled": 2}
        (tokens_in,) = [
            p for p in points(found[pm.CRITICAL_PATH_TOKENS]) if p.attributes["gen_ai.token.type"] == "input"
        ]
        assert tokens_in.value == 7
        assert tokens_in.attributes == {"agent_profiler.root_operation": "root", "gen_ai.token.type": "input"}
        scope = next(sm.scope for rm in data.resource_metrics for sm in rm.scope_metrics)
        assert scope.name == "otel_agent_profiler"
    finally:
        provider.shutdown()
