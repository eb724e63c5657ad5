"""``AgentProfilerSpanProcessor`` with real SDK components: completion, timeouts, caps, flush and
shutdown, sampling, options, concurrency, and the promise never to raise into the application.

Every test builds its own ``TracerProvider`` (never the global one). The provider holds a plain
``SimpleSpanProcessor`` that records the spans as the SDK ended them (``originals``) and the
profiler, whose downstream exports to ``exporter``. Expected profile attributes are always
computed by the analysis core from the original spans.
"""

from __future__ import annotations

import asyncio
import io
import logging
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Sampler, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_agent_profiler.adapters.sdk_spans import records_from_spans
from otel_agent_profiler.core import TraceProfile, profile_records
from otel_agent_profiler.live import attributes as attr, profiling as profiling_module
from otel_agent_profiler.live.profile_metrics import ProfileMetrics
from otel_agent_profiler.live.profile_options import ProfileOptions
from otel_agent_profiler.live.trace_assembly import TraceAssembly
from otel_agent_profiler.plugin import processor as processor_module
from otel_agent_profiler.plugin.config import _OPTIONS
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor
from tests.support.expected_attributes import expected_of
from tests.support.id_generators import FixedTraceIds

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
PREFIX = "agent_profiler."
CHUNK = "gen_ai.content.completion.chunk"
ALL_PROFILE_KEYS = set(attr.SPAN_ATTRIBUTES) | set(attr.ROOT_ATTRIBUTES)


# -- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiler's environment is clean (internal errors raise: tests/conftest.py)."""
    for variable, _ in _OPTIONS.values():
        monkeypatch.delenv(variable, raising=False)


@dataclass
class Rig:
    provider: TracerProvider
    tracer: trace.Tracer
    profiler: AgentProfilerSpanProcessor
    exporter: InMemorySpanExporter
    originals: InMemorySpanExporter
    reader: InMemoryMetricReader
    meter_provider: MeterProvider
    shut_down: bool = False

    def exported(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def flush(self) -> None:
        assert self.profiler.force_flush(10_000) is True

    def wait_for_exported(self, count: int, timeout: float = 3.0) -> list[ReadableSpan]:
        wait_until(lambda: len(self.exported()) >= count, timeout)
        return self.exported()

    def outcomes(self, name: str = "agent_profiler.spans") -> dict[str, int]:
        return {p.attributes["agent_profiler.outcome"]: p.value for p in metric_points(self.reader, name)}

    def shutdown(self) -> None:
        if not self.shut_down:
            self.shut_down = True
            self.provider.shutdown()
            self.meter_provider.shutdown()


@pytest.fixture
def make_rig() -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(
        *,
        downstream: Sequence[SpanProcessor] = (),
        sampler: Sampler | None = None,
        id_generator: IdGenerator | None = None,
        **options: Any,
    ) -> Rig:
        exporter = InMemorySpanExporter()
        originals = InMemorySpanExporter()
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        # These tests check every attribute's value, so spans get them all; what the default
        # ("essential") leaves out of non-root spans has its own tests.
        options.setdefault("span_attributes", "all")
        profiler = AgentProfilerSpanProcessor(
            downstream=[*downstream, SimpleSpanProcessor(exporter)], meter_provider=meter_provider, **options
        )
        kwargs: dict[str, Any] = {"shutdown_on_exit": False}
        if sampler is not None:
            kwargs["sampler"] = sampler
        if id_generator is not None:
            kwargs["id_generator"] = id_generator
        provider = TracerProvider(**kwargs)
        provider.add_span_processor(SimpleSpanProcessor(originals))
        provider.add_span_processor(profiler)
        rig = Rig(provider, provider.get_tracer("test"), profiler, exporter, originals, reader, meter_provider)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.shutdown()


def wait_until(condition: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    points: list[Any] = []
    if data is None:
        return points
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == name:
                    points.extend(metric.data.data_points)
    return points


def all_metric_names(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    if data is None:
        return set()
    return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def ctx_of(span: Span) -> Context:
    return trace.set_span_in_context(span)


def agent_trace(
    tracer: trace.Tracer, base: int = T0, parent: Context | None = None, *, end_root: bool = True
) -> list[Span]:
    """A small agent run with fixed timestamps: an LLM call, then two tools in parallel.

    Returns ``[root, llm, tool, retrieval, side]``.
    """
    context = parent if parent is not None else Context()
    root = tracer.start_span(
        "invoke_agent planner",
        context=context,
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
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 40,
        },
    )
    llm.add_event(CHUNK, timestamp=base + 12 * MS)
    llm.add_event(CHUNK, timestamp=base + 20 * MS)
    llm.end(end_time=base + 40 * MS)
    tool = tracer.start_span(
        "execute_tool search",
        context=ctx_of(root),
        start_time=base + 45 * MS,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    )
    retrieval = tracer.start_span(
        "retrieve kb",
        context=ctx_of(tool),
        start_time=base + 50 * MS,
        attributes={"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb"},
    )
    retrieval.end(end_time=base + 70 * MS)
    tool.end(end_time=base + 80 * MS)
    side = tracer.start_span(
        "execute_tool lookup",
        context=ctx_of(root),
        start_time=base + 45 * MS,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
    )
    side.end(end_time=base + 60 * MS)
    if end_root:
        root.end(end_time=base + 100 * MS)
    return [root, llm, tool, retrieval, side]


def profile_keys(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith(PREFIX)}


def is_enriched(span: ReadableSpan) -> bool:
    return attr.SELF_TIME_MS in (span.attributes or {})


def expected_attributes(
    originals: Sequence[ReadableSpan], *, complete: bool = True, **profile_kwargs: Any
) -> dict[int, dict[str, Any]]:
    """What the analysis core says about each span: ``{span_id: {attribute: value}}``."""
    expected: dict[int, dict[str, Any]] = {}
    for profile in profile_records(records_from_spans(originals), **profile_kwargs):
        expected.update({int(span_id, 16): values for span_id, values in expected_of(profile, complete).items()})
    return expected


def assert_matches_core(
    exported: Sequence[ReadableSpan],
    originals: Sequence[ReadableSpan],
    *,
    complete: bool = True,
    **profile_kwargs: Any,
) -> None:
    expected = expected_attributes(originals, complete=complete, **profile_kwargs)
    by_id = {span.context.span_id: span for span in exported}
    assert set(by_id) == set(expected)
    for span_id, values in expected.items():
        actual = profile_keys(by_id[span_id])
        assert set(actual) <= ALL_PROFILE_KEYS, set(actual) - ALL_PROFILE_KEYS
        assert {key: actual.get(key) for key in values} == values, by_id[span_id].name


def count_ids(spans: Sequence[ReadableSpan]) -> Counter[int]:
    return Counter(span.context.span_id for span in spans)


class Recorder(SpanProcessor):
    """A downstream processor that records every call."""

    def __init__(self) -> None:
        self.started: list[Span] = []
        self.ended: list[ReadableSpan] = []
        self.flushes = 0
        self.shutdowns = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushes += 1
        return True

    def shutdown(self) -> None:
        self.shutdowns += 1


class Exploding(SpanProcessor):
    """A downstream processor whose every hook raises."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError("on_start exploded")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("on_end exploded")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("force_flush exploded")

    def shutdown(self) -> None:
        raise RuntimeError("shutdown exploded")


def error_logs(caplog: pytest.LogCaptureFixture, where: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and f"internal error in {where};" in r.getMessage()]


# -- completion ---------------------------------------------------------------------------------


def test_complete_trace_is_exported_once_with_the_cores_profile(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    spans = agent_trace(rig.tracer)
    exported = rig.wait_for_exported(len(spans))  # no flush needed: the trace completed
    assert count_ids(exported) == count_ids(rig.originals.get_finished_spans())
    assert set(count_ids(exported).values()) == {1}
    assert all(is_enriched(span) for span in exported)
    assert_matches_core(exported, rig.originals.get_finished_spans())
    root = next(s for s in exported if s.parent is None)
    assert root.attributes[attr.TRACE_COMPLETE] is True
    assert root.attributes[attr.TRACE_SPAN_COUNT] == 5
    assert root.attributes[attr.TRACE_DURATION_MS] == pytest.approx(100.0)
    # The LLM call streamed: its first chunk came 7 ms after it started.
    llm = next(s for s in exported if s.name == "chat gpt-4o")
    assert llm.attributes[attr.TIME_TO_FIRST_TOKEN_MS] == pytest.approx(7.0)
    assert llm.attributes[attr.CATEGORY] == "llm"
    assert llm.attributes[attr.OPERATION] == "gpt-4o"
    time.sleep(0.05)
    assert len(rig.exported()) == len(spans)
    assert rig.outcomes() == {"profiled": 5}
    assert rig.outcomes("agent_profiler.traces") == {"complete": 1}


def test_only_non_root_spans_lack_trace_totals(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent_trace(rig.tracer)
    exported = rig.wait_for_exported(5)
    for span in exported:
        keys = set(profile_keys(span))
        required_span_keys = set(attr.SPAN_ATTRIBUTES) - {
            attr.TIME_TO_FIRST_TOKEN_MS,
            attr.COST_USD,
            attr.CONTEXT_WINDOW_USE,
            *attr.LLM_PHASE_ATTRIBUTES,
            *attr.BACKEND_ATTRIBUTES,
        }
        assert required_span_keys <= keys
        if span.parent is None:
            assert attr.TRACE_DURATION_MS in keys and attr.TRACE_COMPLETE in keys
        else:
            assert not keys & set(attr.ROOT_ATTRIBUTES), span.name


def test_trace_is_held_until_its_last_span_ends(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    root.end(end_time=T0 + 10 * MS)  # the root ends first: the child is still open
    time.sleep(0.1)
    assert rig.exported() == []
    child.end(end_time=T0 + 20 * MS)
    exported = rig.wait_for_exported(2)
    assert len(exported) == 2
    assert all(is_enriched(span) for span in exported)
    assert_matches_core(exported, rig.originals.get_finished_spans())
    exported_root = next(s for s in exported if s.name == "root")
    assert exported_root.attributes[attr.TRACE_COMPLETE] is True


def test_profiling_happens_off_the_applications_thread(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = make_rig()
    release = threading.Event()
    threads: list[threading.Thread] = []
    real = profiling_module.profile_trace

    def slow_profile(*args: Any, **kwargs: Any) -> TraceProfile:
        threads.append(threading.current_thread())
        release.wait(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(profiling_module, "profile_trace", slow_profile)
    started = time.monotonic()
    agent_trace(rig.tracer)  # would block here if profiling ran on this thread
    assert time.monotonic() - started < 1.0
    assert wait_until(lambda: bool(threads))
    release.set()
    rig.wait_for_exported(5)
    assert threads and all(thread is not threading.current_thread() for thread in threads)


def test_span_with_a_remote_parent_is_a_local_root(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    remote = SpanContext(
        trace_id=0x5B8EFFF798038103D269B633813FC60C,
        span_id=0xEEE19B7EC3C1B174,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    spans = agent_trace(rig.tracer, parent=trace.set_span_in_context(NonRecordingSpan(remote)))
    exported = rig.wait_for_exported(len(spans))  # complete without any flush or timeout
    root = next(s for s in exported if s.name == "invoke_agent planner")
    assert root.parent is not None and root.parent.is_remote
    assert root.context.trace_id == remote.trace_id
    assert root.attributes[attr.TRACE_COMPLETE] is True
    assert root.attributes[attr.TRACE_SPAN_COUNT] == 5
    assert_matches_core(exported, rig.originals.get_finished_spans())


def test_span_of_an_already_profiled_trace_is_exported_unprofiled(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root, *_ = agent_trace(rig.tracer)
    rig.wait_for_exported(5)
    late = rig.tracer.start_span("late", context=ctx_of(root), start_time=T0 + 200 * MS)
    late.end(end_time=T0 + 210 * MS)
    exported = rig.wait_for_exported(6)
    late_exported = next(s for s in exported if s.name == "late")
    assert not profile_keys(late_exported)
    assert len(exported) == 6
    rig.flush()
    assert rig.outcomes() == {"profiled": 5, "unprofiled_late": 1}


def test_span_starting_after_its_trace_completed_is_late_not_a_new_trace(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = threading.Event()
    gate = threading.Event()
    real = profiling_module.profile_trace

    def gated(records: Any, *args: Any, **kwargs: Any) -> TraceProfile:
        if records[0].name == "blocker":
            entered.set()
            gate.wait(5)
        return real(records, *args, **kwargs)

    monkeypatch.setattr(profiling_module, "profile_trace", gated)
    rig = make_rig()
    blocker = rig.tracer.start_span("blocker")
    blocker.end()
    assert entered.wait(5)  # the worker is busy with the first trace
    root = rig.tracer.start_span("root", start_time=T0)
    root.end(end_time=T0 + 10 * MS)  # complete: waits for the worker
    late = rig.tracer.start_span("late", context=ctx_of(root), start_time=T0 + 20 * MS)
    late.end(end_time=T0 + 30 * MS)
    gate.set()
    rig.flush()
    by_name = {s.name: s for s in rig.exported()}
    assert len(rig.exported()) == 3
    assert by_name["root"].attributes[attr.TRACE_SPAN_COUNT] == 1
    assert by_name["root"].attributes[attr.TRACE_COMPLETE] is True
    assert not profile_keys(by_name["late"]), "the late span was profiled as a trace of its own"
    assert rig.outcomes("agent_profiler.traces") == {"complete": 2}


# -- the wait for incomplete traces -------------------------------------------------------------


def _child_never_ends(rig: Rig) -> tuple[Span, Span]:
    root = rig.tracer.start_span("invoke_agent a", start_time=T0, attributes={"gen_ai.operation.name": "invoke_agent"})
    done = rig.tracer.start_span("step done", context=ctx_of(root), start_time=T0 + MS)
    done.end(end_time=T0 + 5 * MS)
    hanging = rig.tracer.start_span("step hanging", context=ctx_of(root), start_time=T0 + 2 * MS)
    root.end(end_time=T0 + 10 * MS)
    return root, hanging


def test_trace_with_a_span_that_never_ends_is_profiled_after_the_wait(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(trace_timeout_s=0.2)
    _, hanging = _child_never_ends(rig)
    time.sleep(0.5)
    exported = rig.wait_for_exported(2, timeout=1.0)
    assert sorted(s.name for s in exported) == ["invoke_agent a", "step done"], "timed-out trace was not exported"
    assert all(is_enriched(s) for s in exported)
    root = next(s for s in exported if s.name == "invoke_agent a")
    assert root.attributes[attr.TRACE_COMPLETE] is False
    assert_matches_core(exported, rig.originals.get_finished_spans(), complete=False)
    hanging.end(end_time=T0 + 30 * MS)
    exported = rig.wait_for_exported(3)
    late = next(s for s in exported if s.name == "step hanging")
    assert not profile_keys(late)
    assert rig.outcomes("agent_profiler.traces") == {"timed_out": 1}
    assert rig.outcomes() == {"profiled": 2, "unprofiled_late": 1}


def test_trace_whose_root_never_ends_is_profiled_after_the_wait(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(trace_timeout_s=0.2)
    root = rig.tracer.start_span("root", start_time=T0)
    for i in range(2):
        child = rig.tracer.start_span(f"child {i}", context=ctx_of(root), start_time=T0 + i * MS)
        child.end(end_time=T0 + (i + 3) * MS)
    time.sleep(0.5)
    exported = rig.wait_for_exported(2, timeout=1.0)
    assert sorted(s.name for s in exported) == ["child 0", "child 1"], "timed-out trace was not exported"
    for span in exported:
        # Their parent never ended, so each child is a root of what was profiled.
        assert span.attributes[attr.TRACE_COMPLETE] is False
    assert_matches_core(exported, rig.originals.get_finished_spans(), complete=False)
    root.end(end_time=T0 + 10 * MS)
    exported = rig.wait_for_exported(3)
    assert not profile_keys(next(s for s in exported if s.name == "root"))


def test_wait_also_applies_once_the_worker_is_running(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(trace_timeout_s=0.2)
    agent_trace(rig.tracer)  # a complete trace first
    rig.wait_for_exported(5)
    _, hanging = _child_never_ends(rig)
    assert wait_until(lambda: len(rig.exported()) >= 7, timeout=1.5)
    root = next(s for s in rig.exported() if s.name == "invoke_agent a")
    assert root.attributes[attr.TRACE_COMPLETE] is False
    hanging.end()


# -- memory caps --------------------------------------------------------------------------------


def test_trace_cap_exports_the_oldest_trace_unprofiled(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_traces=2)
    root_a = rig.tracer.start_span("a root", start_time=T0)
    a_child = rig.tracer.start_span("a child", context=ctx_of(root_a), start_time=T0 + MS)
    a_child.end(end_time=T0 + 2 * MS)
    root_b = rig.tracer.start_span("b root", start_time=T0 + 3 * MS)
    assert rig.exported() == []
    root_c = rig.tracer.start_span("c root", start_time=T0 + 4 * MS)  # third trace: a is pushed out
    exported = rig.wait_for_exported(1)  # by the worker, off the application's thread
    assert [s.name for s in exported] == ["a child"]
    assert not profile_keys(exported[0])
    root_a.end(end_time=T0 + 10 * MS)  # later spans of a follow it out, unprofiled
    assert [s.name for s in rig.wait_for_exported(2)] == ["a child", "a root"]
    assert not profile_keys(rig.exported()[1])
    root_b.end(end_time=T0 + 11 * MS)
    root_c.end(end_time=T0 + 12 * MS)
    rig.flush()
    by_name = {s.name: s for s in rig.exported()}
    assert len(rig.exported()) == 4
    assert is_enriched(by_name["b root"]) and is_enriched(by_name["c root"])
    assert rig.outcomes() == {"unprofiled_trace_cap": 2, "profiled": 2}


class SlowExporter(InMemorySpanExporter):
    """A real exporter whose every export takes ``delay_s`` (a slow network)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(self.delay_s)
        return super().export(spans)


@pytest.mark.parametrize("cap", ["trace", "span"])
def test_spans_a_cap_pushes_out_are_exported_off_the_applications_thread(
    make_rig: Callable[..., Rig], cap: str
) -> None:
    # A SimpleSpanProcessor exports on the calling thread: called from the app's thread, a
    # pushed-out trace would hold the application up for the whole slow export.
    slow = SlowExporter(delay_s=0.5)
    rig = make_rig(downstream=[SimpleSpanProcessor(slow)], max_traces=1, max_spans_per_trace=2)
    first = rig.tracer.start_span("first root", start_time=T0)
    for i in range(2):
        rig.tracer.start_span(f"first child {i}", context=ctx_of(first), start_time=T0 + MS).end(end_time=T0 + 2 * MS)
    started = time.monotonic()
    if cap == "trace":
        second = rig.tracer.start_span("second root", start_time=T0 + 3 * MS)  # the first trace is evicted
    else:
        first.end(end_time=T0 + 4 * MS)  # its third span: the whole trace is released
    assert time.monotonic() - started < 0.25
    rig.flush()
    names = {s.name for s in slow.get_finished_spans()}
    assert {"first child 0", "first child 1"} <= names
    if cap == "trace":
        second.end(end_time=T0 + 5 * MS)
        first.end(end_time=T0 + 6 * MS)
    rig.flush()
    assert count_ids(slow.get_finished_spans()) == count_ids(rig.originals.get_finished_spans())
    assert count_ids(rig.exported()) == count_ids(rig.originals.get_finished_spans())


def test_span_cap_exports_the_whole_trace_unprofiled(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_spans_per_trace=5)
    root = rig.tracer.start_span("root", start_time=T0)
    for i in range(7):
        child = rig.tracer.start_span(f"child {i}", context=ctx_of(root), start_time=T0 + i * MS)
        child.end(end_time=T0 + (i + 1) * MS)
    root.end(end_time=T0 + 10 * MS)
    rig.flush()
    exported = rig.exported()
    assert len(exported) == 8
    assert set(count_ids(exported).values()) == {1}
    assert not any(profile_keys(s) for s in exported)
    assert rig.outcomes() == {"unprofiled_span_cap": 8}
    assert rig.outcomes("agent_profiler.traces") == {}


def test_caps_never_drop_spans_under_load(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_traces=3, max_spans_per_trace=4)
    open_roots = []
    for n in range(30):
        spans = agent_trace(rig.tracer, base=T0 + n * 1000 * MS, end_root=False)
        open_roots.append(spans[0])
        if n % 4 == 3:
            for root in open_roots:
                root.end()
            open_roots.clear()
    for root in open_roots:
        root.end()
    rig.flush()
    exported = rig.exported()
    assert count_ids(exported) == count_ids(rig.originals.get_finished_spans())
    assert set(count_ids(exported).values()) == {1}
    assert sum(rig.outcomes().values()) == 150


# -- flush and shutdown -------------------------------------------------------------------------


def test_force_flush_exports_the_ended_spans_of_a_running_trace_without_ending_it(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 4 * MS)
    result = rig.profiler.force_flush(5000)
    assert result is True
    exported = rig.exported()
    assert [s.name for s in exported] == ["child"]
    assert profile_keys(exported[0]) == {attr.EXPORTED_EARLY: True}
    root.end(end_time=T0 + 10 * MS)
    rig.flush()
    assert [s.name for s in rig.exported()] == ["child", "root"]
    # The root, exported when the trace completed, carries the totals of both spans.
    root_out = rig.exported()[1]
    assert root_out.attributes[attr.TRACE_SPAN_COUNT] == 2
    assert root_out.attributes[attr.TRACE_COMPLETE] is True
    expected = expected_attributes(rig.originals.get_finished_spans())
    assert {key: root_out.attributes.get(key) for key in expected[root.context.span_id]} == expected[
        root.context.span_id
    ]
    assert rig.outcomes("agent_profiler.traces") == {"complete": 1}
    assert rig.outcomes() == {"profiled": 2}


def flushing_agent_run(
    tracer: trace.Tracer, flush: Callable[[], object], base: int = T0, *, end_root: bool = True
) -> list[Span]:
    """A 12-span agent run that flushes after every span it ends, as Strands 0.2.1 does.

    Three cycles of an LLM call and a tool (the second tool retrieves), then a final answer:
    ``[root, cycle x3, chat x3, tool x3, retrieval, final chat]``, in the order they started.
    """
    spans: list[Span] = []
    for _ in agent_run_steps(tracer, spans, base, end_root=end_root):
        flush()
    return spans


def agent_run_steps(
    tracer: trace.Tracer, spans: list[Span], base: int = T0, *, end_root: bool = True
) -> Iterator[None]:
    """The run of ``flushing_agent_run``, one step per span end (appending its spans to ``spans``)."""

    def start(name: str, parent: Span | None, at_ms: int, attributes: dict[str, Any]) -> Span:
        context = ctx_of(parent) if parent is not None else Context()
        span = tracer.start_span(name, context=context, start_time=base + at_ms * MS, attributes=attributes)
        spans.append(span)
        return span

    root = start("invoke_agent helper", None, 0, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
    for cycle_index in range(3):
        at = 1 + cycle_index * 30
        cycle = start(f"cycle {cycle_index}", root, at, {})
        chat = start(
            "chat gpt-4o",
            cycle,
            at + 1,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100 + cycle_index,
                "gen_ai.usage.output_tokens": 20,
            },
        )
        chat.end(end_time=base + (at + 11 + cycle_index) * MS)
        yield
        tool = start(
            f"execute_tool tool{cycle_index}",
            cycle,
            at + 15,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool{cycle_index}"},
        )
        if cycle_index == 1:
            retrieval = start("retrieve kb", tool, at + 16, {"gen_ai.operation.name": "retrieval"})
            retrieval.end(end_time=base + (at + 24) * MS)
            yield
        tool.end(end_time=base + (at + 25) * MS)
        yield
        cycle.end(end_time=base + (at + 28) * MS)
        yield
    final = start(
        "chat gpt-4o",
        root,
        92,
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.output_tokens": 30},
    )
    final.end(end_time=base + 99 * MS)
    yield
    if end_root:
        root.end(end_time=base + 100 * MS)
        yield


def profile_summary(profile: TraceProfile) -> dict[str, Any]:
    """What a profile says, span by span and in total, in a form two profiles can be compared in."""
    return {
        "duration_ns": profile.duration_ns,
        "critical_path_ns": profile.critical_path_ns,
        "span_count": profile.span_count,
        "llm_calls": profile.llm_calls,
        "tokens": profile.tokens,
        "critical_path_tokens": profile.critical_path_tokens,
        "roots": sorted(root.span_id for root in profile.roots),
        "spans": sorted(
            (s.span_id, s.category, s.operation, s.self_time_ns, s.critical_path_ns, s.on_critical_path)
            for s in profile.spans
        ),
    }


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many spans the processor turned into records, call by call."""
    counts: list[int] = []
    real = processor_module.records_from_spans

    def counting(spans: Any) -> Any:
        records = real(spans)
        counts.append(len(records))
        return records

    monkeypatch.setattr(processor_module, "records_from_spans", counting)
    return counts


def test_a_flush_after_every_span_end_still_profiles_the_whole_trace(
    make_rig: Callable[..., Rig], conversions: list[int]
) -> None:
    rig = make_rig()
    spans = flushing_agent_run(rig.tracer, rig.flush)
    assert len(spans) == 12
    # Twelve flushes, and each span made into a record once.
    assert sum(conversions) == 12
    exported = rig.exported()
    assert count_ids(exported) == Counter({span.context.span_id: 1 for span in spans})
    root_id = spans[0].context.span_id
    # Every flush exported what had ended: all but the root left before their trace completed.
    for span in exported:
        if span.context.span_id != root_id:
            assert profile_keys(span) == {attr.EXPORTED_EARLY: True}, span.name
    # The root left when the trace completed, with the profile of all twelve spans, which is the
    # profile the analysis core makes of the same spans offline.
    originals = rig.originals.get_finished_spans()
    (offline,) = profile_records(records_from_spans(originals))
    (live,) = rig.profiler.recent_profiles
    assert profile_summary(live) == profile_summary(offline)
    root_out = next(span for span in exported if span.context.span_id == root_id)
    expected = expected_attributes(originals)[root_id]
    assert {key: root_out.attributes.get(key) for key in expected} == expected
    assert root_out.attributes[attr.TRACE_SPAN_COUNT] == 12
    assert root_out.attributes[attr.TRACE_COMPLETE] is True
    assert attr.EXPORTED_EARLY not in root_out.attributes
    assert rig.outcomes() == {"profiled": 12}
    assert rig.outcomes("agent_profiler.traces") == {"complete": 1}
    assert rig.profiler.held_bytes == 0


def test_spans_ending_after_a_mid_trace_flush_are_enriched_from_the_whole_trace(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    flushes = 0

    def flush_once() -> None:
        # One flush, after the first cycle's tool: the spans ending after it stay with the trace.
        nonlocal flushes
        flushes += 1
        if flushes == 2:
            rig.flush()

    spans = flushing_agent_run(rig.tracer, flush_once)
    rig.flush()
    exported = rig.exported()
    assert count_ids(exported) == Counter({span.context.span_id: 1 for span in spans})
    early = [span.name for span in exported if attr.EXPORTED_EARLY in (span.attributes or {})]
    assert early == ["chat gpt-4o", "execute_tool tool0"]
    later = [span for span in exported if attr.EXPORTED_EARLY not in (span.attributes or {})]
    assert len(later) == 10
    expected = expected_attributes(rig.originals.get_finished_spans())
    for span in later:
        values = expected[span.context.span_id]
        assert {key: span.attributes.get(key) for key in values} == values, span.name
        assert set(profile_keys(span)) <= ALL_PROFILE_KEYS
    assert rig.outcomes() == {"profiled": 12}


def test_a_mid_trace_flush_then_shutdown_loses_nothing(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    first = rig.tracer.start_span("first", context=ctx_of(root), start_time=T0 + MS)
    first.end(end_time=T0 + 3 * MS)
    rig.flush()
    second = rig.tracer.start_span("second", context=ctx_of(root), start_time=T0 + 4 * MS)
    second.end(end_time=T0 + 9 * MS)
    # The application ends with its root still open: shutdown profiles what ended.
    rig.profiler.shutdown()
    exported = rig.exported()
    assert [span.name for span in exported] == ["first", "second"]
    assert profile_keys(exported[0]) == {attr.EXPORTED_EARLY: True}
    # The profile still covers the span exported early.
    assert exported[1].attributes[attr.TRACE_SPAN_COUNT] == 2
    assert exported[1].attributes[attr.TRACE_COMPLETE] is False
    (live,) = rig.profiler.recent_profiles
    assert live.span_count == 2
    assert rig.outcomes() == {"profiled": 2}
    assert rig.outcomes("agent_profiler.traces") == {"flushed": 1}


def test_shutdown_after_everything_was_exported_early_still_profiles_the_trace(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 3 * MS)
    rig.flush()
    rig.profiler.shutdown()
    assert [span.name for span in rig.exported()] == ["child"]
    assert [profile.span_count for profile in rig.profiler.recent_profiles] == [1]
    assert rig.outcomes() == {"profiled": 1}
    assert rig.outcomes("agent_profiler.traces") == {"flushed": 1}


def test_a_trace_timing_out_after_an_early_export_is_profiled_with_every_span(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(trace_timeout_s=0.2)
    spans = flushing_agent_run(rig.tracer, rig.flush, end_root=False)
    assert len(rig.exported()) == 11
    wait_until(lambda: rig.outcomes("agent_profiler.traces") == {"timed_out": 1})
    assert rig.outcomes("agent_profiler.traces") == {"timed_out": 1}
    assert [profile.span_count for profile in rig.profiler.recent_profiles] == [11]
    assert rig.outcomes() == {"profiled": 11}
    spans[0].end()
    rig.flush()
    assert count_ids(rig.exported()) == Counter({span.context.span_id: 1 for span in spans})


def test_without_enrichment_spans_exported_early_go_out_as_they_came(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(enrich_spans=False)
    flushing_agent_run(rig.tracer, rig.flush)
    assert len(rig.exported()) == 12
    assert not any(profile_keys(span) for span in rig.exported())
    assert [profile.span_count for profile in rig.profiler.recent_profiles] == [12]


def test_a_cap_pushing_out_a_trace_after_an_early_export_counts_every_span(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_spans_per_trace=4)
    spans = flushing_agent_run(rig.tracer, rig.flush)
    rig.flush()
    assert count_ids(rig.exported()) == Counter({span.context.span_id: 1 for span in spans})
    # The spans that fit were exported early, until one more pushed the trace out; the rest
    # followed it. None was profiled, and each is counted once, the early ones included.
    assert sum(attr.EXPORTED_EARLY in span.attributes for span in rig.exported()) == 4
    assert rig.outcomes() == {"unprofiled_span_cap": 12}
    assert rig.profiler.recent_profiles == []
    assert rig.profiler.held_bytes == 0


def test_flushing_after_every_span_end_keeps_memory_bounded_and_converts_each_span_once(
    make_rig: Callable[..., Rig], conversions: list[int]
) -> None:
    max_bytes = 100_000
    rig = make_rig(max_traces=8, max_buffer_bytes=max_bytes)
    peak_traces = peak_bytes = 0
    # Twenty runs at a time, interleaved span by span, with a flush after every span end: more
    # traces running than the profiler may hold, so the caps push the oldest out, however much
    # of them was exported early.
    runs = 200
    all_spans: list[Span] = []
    for batch in range(0, runs, 20):
        running = [agent_run_steps(rig.tracer, all_spans, T0 + n * MS) for n in range(batch, batch + 20)]
        while running:
            for run in list(running):
                if next(run, StopIteration) is StopIteration:
                    running.remove(run)
                    continue
                rig.flush()
                peak_traces = max(peak_traces, rig.profiler._buffer.held_traces)
                peak_bytes = max(peak_bytes, rig.profiler.held_bytes)
    rig.flush()
    assert len(all_spans) == runs * 12
    assert count_ids(rig.exported()) == Counter({span.context.span_id: 1 for span in all_spans})
    assert peak_traces <= 8
    assert peak_bytes <= max_bytes
    assert rig.profiler.held_bytes == 0
    assert rig.profiler._buffer.held_traces == 0
    outcomes = rig.outcomes()
    assert sum(outcomes.values()) == runs * 12
    assert outcomes["profiled"] > 0
    assert outcomes["unprofiled_trace_cap"] > 0
    assert outcomes["unprofiled_memory_cap"] > 0
    # No span became a record twice, however many flushes it saw: the work grows with the spans.
    assert sum(conversions) <= runs * 12


def test_the_flush_at_exit_profiles_the_traces_still_running(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 4 * MS)
    assert rig.profiler.flush_at_exit(5000) is True
    exported = rig.exported()
    assert [s.name for s in exported] == ["child"]
    assert exported[0].attributes[attr.TRACE_COMPLETE] is False
    assert_matches_core(exported, rig.originals.get_finished_spans(), complete=False)
    assert rig.outcomes("agent_profiler.traces") == {"flushed": 1}
    root.end(end_time=T0 + 10 * MS)
    rig.flush()
    assert [s.name for s in rig.exported()] == ["child", "root"]
    assert not profile_keys(rig.exported()[1])
    assert rig.outcomes() == {"profiled": 1, "unprofiled_late": 1}


def test_force_flush_flushes_the_downstream_processors(make_rig: Callable[..., Rig]) -> None:
    recorder = Recorder()
    rig = make_rig(downstream=[recorder])
    agent_trace(rig.tracer)
    rig.flush()
    assert recorder.flushes == 1
    assert len(recorder.ended) == 5


def test_provider_force_flush_and_shutdown_reach_the_profiler(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 2 * MS)
    assert rig.provider.force_flush(5000)
    assert [s.name for s in rig.exported()] == ["child"]
    other = rig.tracer.start_span("other", start_time=T0)
    other_child = rig.tracer.start_span("other child", context=ctx_of(other), start_time=T0 + MS)
    other_child.end(end_time=T0 + 2 * MS)
    rig.shutdown()
    assert sorted(s.name for s in rig.exporter.get_finished_spans()) == ["child", "other child"]


def test_shutdown_exports_pending_traces_and_shuts_downstream_once(make_rig: Callable[..., Rig]) -> None:
    recorder = Recorder()
    rig = make_rig(downstream=[recorder])
    root = rig.tracer.start_span("root", start_time=T0)
    child = rig.tracer.start_span("child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 3 * MS)
    rig.profiler.shutdown()
    assert [s.name for s in recorder.ended] == ["child"]
    assert is_enriched(recorder.ended[0])
    assert recorder.ended[0].attributes[attr.TRACE_COMPLETE] is False
    rig.profiler.shutdown()
    rig.profiler.shutdown()
    assert recorder.shutdowns == 1
    assert rig.outcomes("agent_profiler.traces") == {"flushed": 1}


def test_after_shutdown_spans_pass_straight_through(make_rig: Callable[..., Rig]) -> None:
    recorder = Recorder()
    rig = make_rig(downstream=[recorder])
    rig.profiler.shutdown()
    spans = agent_trace(rig.tracer)
    assert len(recorder.ended) == len(spans)  # synchronously, unprofiled
    assert not any(profile_keys(s) for s in recorder.ended)
    result = rig.profiler.force_flush(1000)
    assert isinstance(result, bool)
    rig.profiler.shutdown()
    assert recorder.shutdowns == 1


def test_span_ending_while_shutdown_drains_is_still_exported(make_rig: Callable[..., Rig]) -> None:
    entered = threading.Event()
    release = threading.Event()

    class BlockOnce(Recorder):
        blocking = False

        def on_end(self, span: ReadableSpan) -> None:
            if self.blocking:
                self.blocking = False
                entered.set()
                release.wait(5)
            super().on_end(span)

    recorder = BlockOnce()
    rig = make_rig(downstream=[recorder])
    root = rig.tracer.start_span("pending root", start_time=T0)
    child = rig.tracer.start_span("pending child", context=ctx_of(root), start_time=T0 + MS)
    child.end(end_time=T0 + 2 * MS)
    recorder.blocking = True
    shutdown = threading.Thread(target=rig.profiler.shutdown)
    shutdown.start()
    try:
        assert entered.wait(5), "shutdown did not export the pending trace"
        racer = rig.tracer.start_span("ends during shutdown")
        racer.end()
    finally:
        release.set()
        shutdown.join(10)
    assert not shutdown.is_alive()
    names = [s.name for s in recorder.ended]
    assert "ends during shutdown" in names, f"span ending during shutdown was lost: {names}"


def test_force_flush_returns_within_its_deadline_when_the_worker_is_busy(make_rig: Callable[..., Rig]) -> None:
    entered = threading.Event()
    release = threading.Event()

    class Slow(Recorder):
        def on_end(self, span: ReadableSpan) -> None:
            entered.set()
            release.wait(5)
            super().on_end(span)

    slow = Slow()
    rig = make_rig(downstream=[slow])
    try:
        span = rig.tracer.start_span("root")
        span.end()  # the worker exports it and blocks in the slow downstream
        assert entered.wait(5)
        started = time.monotonic()
        result = rig.profiler.force_flush(200)
        elapsed = time.monotonic() - started
        assert isinstance(result, bool)
        assert result is False
        assert elapsed < 1.0, f"force_flush(200) took {elapsed:.2f}s"
    finally:
        release.set()
    rig.flush()
    assert len(slow.ended) == 1


def test_force_flush_returns_within_its_deadline_with_a_backlog(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = profiling_module.profile_trace

    def slow_profile(*args: Any, **kwargs: Any) -> TraceProfile:
        time.sleep(0.1)
        return real(*args, **kwargs)

    monkeypatch.setattr(profiling_module, "profile_trace", slow_profile)
    rig = make_rig()
    roots = []
    for n in range(10):  # ten incomplete traces waiting: draining them all takes ~1 s
        root = rig.tracer.start_span(f"root {n}")
        child = rig.tracer.start_span(f"child {n}", context=ctx_of(root))
        child.end()
        roots.append(root)
    started = time.monotonic()
    result = rig.profiler.force_flush(300)
    elapsed = time.monotonic() - started
    assert isinstance(result, bool)
    assert elapsed < 0.7, f"force_flush(300) took {elapsed:.2f}s"
    # Whatever the first flush left behind is exported later, once.
    rig.flush()
    for root in roots:
        root.end()
    rig.flush()
    assert count_ids(rig.exported()) == count_ids(rig.originals.get_finished_spans())
    assert set(count_ids(rig.exported()).values()) == {1}


def test_exporting_is_not_traced_by_instrumentations(make_rig: Callable[..., Rig]) -> None:
    seen: list[bool] = []

    class Probe(Recorder):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(is_instrumentation_enabled())
            super().on_end(span)

    rig = make_rig(downstream=[Probe()])
    agent_trace(rig.tracer)
    rig.flush()
    assert seen == [False] * 5
    assert is_instrumentation_enabled()


# -- never raises into the application ----------------------------------------------------------


def test_exploding_downstream_never_reaches_the_app(
    make_rig: Callable[..., Rig], never_raise: None, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(downstream=[Exploding()])
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        agent_trace(rig.tracer, base=T0 + 1000 * MS)
        result = rig.profiler.force_flush(5000)
        assert result is False  # a downstream processor failed to flush
        rig.profiler.force_flush(5000)
        rig.profiler.shutdown()
        rig.profiler.shutdown()
    exported = rig.exporter.get_finished_spans()
    assert len(exported) == 10
    assert all(is_enriched(s) for s in exported)
    for where in ("downstream on_start", "downstream on_end", "downstream force_flush", "downstream shutdown"):
        assert len(error_logs(caplog, where)) == 1, where


def test_failing_analysis_exports_spans_unprofiled(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> TraceProfile:
        raise RuntimeError("classifier exploded")

    monkeypatch.setattr(profiling_module, "profile_trace", broken)
    rig = make_rig()
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        agent_trace(rig.tracer, base=T0 + 1000 * MS)
        rig.flush()
    exported = rig.exported()
    assert count_ids(exported) == count_ids(rig.originals.get_finished_spans())
    assert len(exported) == 10
    assert not any(profile_keys(s) for s in exported)
    assert len(error_logs(caplog, "profiling")) == 1
    assert rig.outcomes() == {"unprofiled_error": 10}


def test_failing_classifier_from_overrides_exports_spans_unprofiled(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = make_rig(category_overrides={"fetch_*": "tool"})

    def broken(name: str, attributes: Any) -> str:
        raise RuntimeError("classifier exploded")

    rig.profiler._profiling.options = ProfileOptions(broken)
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        rig.flush()
    assert len(rig.exported()) == 5
    assert not any(profile_keys(s) for s in rig.exported())
    assert len(error_logs(caplog, "profiling")) == 1


def test_failing_enrichment_exports_original_spans_and_keeps_metrics(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("enrichment exploded")

    monkeypatch.setattr(profiling_module, "span_attributes", broken)
    rig = make_rig()
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        agent_trace(rig.tracer, base=T0 + 1000 * MS)
        rig.flush()
    assert len(rig.exported()) == 10
    assert not any(profile_keys(s) for s in rig.exported())
    assert len(error_logs(caplog, "enrichment")) == 1
    assert rig.outcomes("agent_profiler.traces") == {"complete": 2}


def test_failing_metrics_still_export_enriched_spans(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: ProfileMetrics, profile: TraceProfile) -> None:
        raise RuntimeError("metrics exploded")

    monkeypatch.setattr(ProfileMetrics, "record", broken)
    rig = make_rig()
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        agent_trace(rig.tracer, base=T0 + 1000 * MS)
        rig.flush()
    assert len(rig.exported()) == 10
    assert all(is_enriched(s) for s in rig.exported())
    assert len(error_logs(caplog, "metrics")) == 1


def test_failing_buffer_still_exports_every_span(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("buffer exploded")

    # What the application's thread calls on the buffer: a span start, and a span end's two steps.
    monkeypatch.setattr(TraceAssembly, "span_started", broken)
    monkeypatch.setattr(TraceAssembly, "refused_now", broken)
    monkeypatch.setattr(TraceAssembly, "span_ended_later", broken)
    rig = make_rig()
    with caplog.at_level(logging.ERROR):
        agent_trace(rig.tracer)
        agent_trace(rig.tracer, base=T0 + 1000 * MS)
        rig.flush()
    assert count_ids(rig.exported()) == count_ids(rig.originals.get_finished_spans())
    assert len(rig.exported()) == 10
    assert len(error_logs(caplog, "on_start")) == 1
    assert len(error_logs(caplog, "on_end")) == 1


def test_errors_are_logged_once_per_place_across_processors(
    make_rig: Callable[..., Rig],
    never_raise: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = make_rig(downstream=[Exploding()])
    second = make_rig(downstream=[Exploding()])
    with caplog.at_level(logging.ERROR):
        for rig in (first, second):
            agent_trace(rig.tracer)
            rig.profiler.force_flush(5000)
    assert len(error_logs(caplog, "downstream on_end")) == 1
    assert len(first.exported()) == len(second.exported()) == 5


# -- sampling -----------------------------------------------------------------------------------


def _random_trace_ids(count: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) | 1 for _ in range(count)]


def _single_span_traces(rig: Rig, count: int) -> None:
    for n in range(count):
        span = rig.tracer.start_span(f"trace {n}", start_time=T0 + n * MS)
        span.end(end_time=T0 + n * MS + MS)


def test_sample_rate_profiles_a_fraction_and_exports_every_span(make_rig: Callable[..., Rig]) -> None:
    ids = _random_trace_ids(200)
    profiled_sets = []
    for _ in range(2):
        rig = make_rig(sample_rate=0.5, id_generator=FixedTraceIds(ids))
        _single_span_traces(rig, 200)
        rig.flush()
        exported = rig.exported()
        assert len(exported) == 200
        assert set(count_ids(exported).values()) == {1}
        profiled = {s.context.trace_id for s in exported if is_enriched(s)}
        unprofiled = [s for s in exported if not is_enriched(s)]
        assert all(not profile_keys(s) for s in unprofiled)
        profiled_sets.append(profiled)
        assert 60 <= len(profiled) <= 140, len(profiled)
        assert rig.outcomes()["profiled"] == len(profiled)
    # Deterministic by trace id: the same traces are profiled every time.
    assert profiled_sets[0] == profiled_sets[1]


def test_sample_rate_decides_per_trace_not_per_span(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(sample_rate=0.5, id_generator=FixedTraceIds(_random_trace_ids(40)))
    for n in range(40):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    by_trace: dict[int, set[bool]] = defaultdict(set)
    for span in rig.exported():
        by_trace[span.context.trace_id].add(is_enriched(span))
    assert len(by_trace) == 40
    assert all(len(kinds) == 1 for kinds in by_trace.values())
    assert {True, False} == set().union(*by_trace.values())


def test_sample_rate_zero_profiles_nothing(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(sample_rate=0)
    spans = agent_trace(rig.tracer)
    assert len(rig.exported()) == len(spans)  # passed straight through
    assert not any(profile_keys(s) for s in rig.exported())
    assert rig.profiler.recent_profiles == []


def test_sdk_sampler_keeps_working(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(sampler=TraceIdRatioBased(0.5))
    for n in range(60):
        agent_trace(rig.tracer, base=T0 + n * 1000 * MS)
    rig.flush()
    originals = rig.originals.get_finished_spans()
    assert 0 < len(originals) < 300
    assert len(originals) % 5 == 0
    exported = rig.exported()
    assert count_ids(exported) == count_ids(originals)
    assert all(is_enriched(s) for s in exported)
    assert_matches_core(exported, originals)


# -- options ------------------------------------------------------------------------------------


def test_metrics_disabled_records_nothing(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(metrics_enabled=False)
    agent_trace(rig.tracer)
    agent_trace(rig.tracer, base=T0 + 1000 * MS)
    rig.flush()
    assert len(rig.exported()) == 10
    assert all(is_enriched(s) for s in rig.exported())
    assert not {n for n in all_metric_names(rig.reader) if n.startswith(("agent_profiler", "gen_ai"))}


def test_enrich_spans_false_exports_unchanged_spans_but_still_profiles(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(enrich_spans=False)
    agent_trace(rig.tracer)
    rig.flush()
    exported = rig.exported()
    originals = {s.context.span_id: s for s in rig.originals.get_finished_spans()}
    assert len(exported) == 5
    for span in exported:
        assert dict(span.attributes) == dict(originals[span.context.span_id].attributes)
    assert len(rig.profiler.recent_profiles) == 1
    assert rig.outcomes("agent_profiler.traces") == {"complete": 1}
    assert metric_points(rig.reader, "agent_profiler.operation.self_time")


def test_console_report_is_printed_at_shutdown(
    make_rig: Callable[..., Rig], capsys: pytest.CaptureFixture[str]
) -> None:
    rig = make_rig(console_report=True)
    agent_trace(rig.tracer)
    rig.flush()
    assert "Where the time went" not in capsys.readouterr().err
    rig.profiler.shutdown()
    err = capsys.readouterr().err
    assert "1 trace profiled" in err
    assert "Where the time went" in err
    assert "Span tree" in err
    for name in ("invoke_agent planner", "chat gpt-4o", "execute_tool search", "retrieve kb"):
        assert name in err
    rig.profiler.shutdown()
    assert capsys.readouterr().err == ""


def test_console_report_on_an_ascii_terminal(make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="backslashreplace")
    monkeypatch.setattr(sys, "stderr", stream)
    rig = make_rig(console_report=True)
    span = rig.tracer.start_span("caf\u00e9 step", start_time=T0)
    span.end(end_time=T0 + 10 * MS)
    rig.flush()
    rig.profiler.shutdown()
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "Where the time went" in text
    assert "Span tree" in text
    assert "caf" in text


def test_console_report_without_traces(make_rig: Callable[..., Rig], capsys: pytest.CaptureFixture[str]) -> None:
    rig = make_rig(console_report=True)
    rig.profiler.shutdown()
    assert "no traces were profiled" in capsys.readouterr().err


def test_no_console_report_by_default(make_rig: Callable[..., Rig], capsys: pytest.CaptureFixture[str]) -> None:
    rig = make_rig()
    agent_trace(rig.tracer)
    rig.profiler.shutdown()
    assert capsys.readouterr().err == ""


def test_category_overrides_apply_to_exported_spans(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(category_overrides={"fetch_*": "tool", "*cache*": "memory"})
    root = rig.tracer.start_span("run", start_time=T0)
    specs = [
        ("fetch_weather", {}, "tool"),
        ("fetch_answer", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, "tool"),
        ("fetch_explicit", {"agent_profiler.category": "retrieval"}, "retrieval"),
        ("read cache", {}, "memory"),
        ("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, "llm"),
    ]
    for n, (name, attributes, _) in enumerate(specs):
        span = rig.tracer.start_span(name, context=ctx_of(root), start_time=T0 + n * MS, attributes=attributes)
        span.end(end_time=T0 + (n + 1) * MS)
    root.end(end_time=T0 + 10 * MS)
    rig.flush()
    by_name = {s.name: s for s in rig.exported()}
    for name, _, category in specs:
        assert by_name[name].attributes[attr.CATEGORY] == category, name
    assert_matches_core(rig.exported(), rig.originals.get_finished_spans(), classifier=rig.profiler.config.classifier())


def test_price_table_adds_costs(make_rig: Callable[..., Rig]) -> None:
    prices = {"gpt-4o": {"input": 2.5, "output": 10.0}}
    rig = make_rig(prices=prices)
    agent_trace(rig.tracer)
    rig.flush()
    by_name = {s.name: s for s in rig.exported()}
    expected_cost = (120 * 2.5 + 40 * 10.0) / 1e6
    assert by_name["chat gpt-4o"].attributes[attr.COST_USD] == pytest.approx(expected_cost)
    assert by_name["invoke_agent planner"].attributes[attr.TRACE_COST_USD] == pytest.approx(expected_cost)
    assert attr.COST_USD not in by_name["execute_tool search"].attributes
    assert_matches_core(rig.exported(), rig.originals.get_finished_spans(), prices=rig.profiler.config.prices)


def test_the_built_in_prices_are_used_by_default(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent_trace(rig.tracer)
    rig.flush()
    by_name = {s.name: s for s in rig.exported()}
    expected_cost = (120 * 2.5 + 40 * 10.0) / 1e6  # gpt-4o's list price
    assert by_name["chat gpt-4o"].attributes[attr.COST_USD] == pytest.approx(expected_cost)
    assert by_name["invoke_agent planner"].attributes[attr.TRACE_COST_USD] == pytest.approx(expected_cost)


def test_context_windows_option_sets_the_window_use_of_llm_calls(make_rig: Callable[..., Rig]) -> None:
    for windows, expected in ((None, 120 / 128_000), ({"gpt-4o": 1_000}, 0.12)):
        rig = make_rig() if windows is None else make_rig(context_windows=windows)
        agent_trace(rig.tracer)
        rig.flush()
        by_name = {s.name: s for s in rig.exported()}
        assert by_name["chat gpt-4o"].attributes[attr.CONTEXT_WINDOW_USE] == pytest.approx(expected, abs=1e-4)


def test_an_empty_price_table_turns_pricing_off(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(prices={})
    agent_trace(rig.tracer)
    rig.flush()
    for span in rig.exported():
        assert attr.COST_USD not in span.attributes
        assert attr.TRACE_COST_USD not in span.attributes


def test_options_from_the_environment(make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENT_PROFILER_ENRICH_SPANS", "false")
    rig = make_rig()
    agent_trace(rig.tracer)
    rig.flush()
    assert not any(profile_keys(s) for s in rig.exported())
    assert len(rig.profiler.recent_profiles) == 1


def test_recent_profiles_keep_the_last_twenty(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    for n in range(25):
        span = rig.tracer.start_span(f"trace {n}", start_time=T0 + n * MS)
        span.end(end_time=T0 + n * MS + MS)
        rig.flush()
    recent = rig.profiler.recent_profiles
    assert len(recent) == 20
    assert [p.roots[0].name for p in recent] == [f"trace {n}" for n in range(5, 25)]


# -- concurrency --------------------------------------------------------------------------------


def _assert_concurrent_run(rig: Rig, traces: int, spans_per_trace: int) -> None:
    rig.flush()
    exported = rig.exported()
    originals = rig.originals.get_finished_spans()
    assert len(originals) == traces * spans_per_trace
    ids = count_ids(exported)
    assert ids == count_ids(originals)
    assert set(ids.values()) == {1}, "a span was exported more than once"
    assert all(is_enriched(s) for s in exported)
    # The same as profiling each trace on its own, sequentially.
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in originals:
        by_trace[span.context.trace_id].append(span)
    assert len(by_trace) == traces
    exported_by_id = {s.context.span_id: s for s in exported}
    for spans in by_trace.values():
        expected = expected_attributes(spans)
        for span_id, values in expected.items():
            actual = profile_keys(exported_by_id[span_id])
            assert {key: actual.get(key) for key in values} == values
    assert rig.outcomes() == {"profiled": traces * spans_per_trace}
    assert rig.outcomes("agent_profiler.traces") == {"complete": traces}


def _shape(span: ReadableSpan) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return span.name, tuple(sorted(profile_keys(span).items()))


def test_threads_give_the_same_results_as_a_sequential_run(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def run(thread: int) -> None:
        try:
            barrier.wait()
            for n in range(50):
                agent_trace(rig.tracer, base=T0 + (thread * 50 + n) * 1000 * MS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    _assert_concurrent_run(rig, 400, 5)
    # Same span shapes, same values: every trace has identical profile attributes.
    shapes = Counter(_shape(s) for s in rig.exported())
    assert len(shapes) == 5
    assert set(shapes.values()) == {400}

    sequential = make_rig()
    agent_trace(sequential.tracer)
    sequential.flush()
    assert {_shape(s) for s in sequential.exported()} == set(shapes)


def test_asyncio_tasks_give_the_same_results_as_a_sequential_run(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    tracer = rig.tracer

    async def child(j: int) -> None:
        with tracer.start_as_current_span(
            f"execute_tool t{j}", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{j}"}
        ):
            await asyncio.sleep(0.001 * (j + 1))
            with tracer.start_as_current_span(
                "chat m", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            ):
                await asyncio.sleep(0)

    async def one_trace(n: int) -> None:
        with tracer.start_as_current_span(
            "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        ):
            await asyncio.sleep(0)
            await asyncio.gather(*(child(j) for j in range(3)))

    async def main() -> None:
        await asyncio.gather(*(one_trace(n) for n in range(50)))

    asyncio.run(main())
    _assert_concurrent_run(rig, 50, 7)
    for span in rig.exported():
        if span.parent is None:
            assert span.attributes[attr.TRACE_SPAN_COUNT] == 7
            assert span.attributes[attr.TRACE_LLM_CALLS] == 3


def test_many_traces_in_flight_at_once(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    open_traces = [agent_trace(rig.tracer, base=T0 + n * 1000 * MS, end_root=False) for n in range(100)]
    assert rig.exported() == []
    for n, spans in enumerate(reversed(open_traces)):
        spans[0].end(end_time=T0 + (99 - n) * 1000 * MS + 100 * MS)
    _assert_concurrent_run(rig, 100, 5)


class RepeatedSpanIds(IdGenerator):
    """Trace id 7 for every trace; span ids 1, 2, 2, 3, ...: the third span reuses the second's id."""

    def __init__(self) -> None:
        self._span_ids = iter([1, 2, 2, 3, 4, 5])

    def generate_span_id(self) -> int:
        return next(self._span_ids)

    def generate_trace_id(self) -> int:
        return 7


def test_a_duplicate_span_id_is_exported_unchanged_and_its_kept_copy_enriched(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(id_generator=RepeatedSpanIds())
    root = rig.tracer.start_span("root", context=Context(), start_time=T0)
    short = rig.tracer.start_span("short", context=ctx_of(root), start_time=T0 + 1 * MS)
    long = rig.tracer.start_span("long", context=ctx_of(root), start_time=T0 + 2 * MS)
    assert short.get_span_context().span_id == long.get_span_context().span_id == 2
    short.end(end_time=T0 + 3 * MS)
    long.end(end_time=T0 + 50 * MS)
    root.end(end_time=T0 + 60 * MS)
    exported = {s.name: s for s in rig.wait_for_exported(3)}
    assert set(exported) == {"root", "short", "long"}  # nothing lost
    # The analysis keeps the longest ended copy of a duplicated id; the other goes out as it came.
    assert is_enriched(exported["root"]) and is_enriched(exported["long"])
    assert not is_enriched(exported["short"])
    assert exported["long"].attributes["agent_profiler.self_time_ms"] == pytest.approx(48.0)
    assert exported["root"].attributes["agent_profiler.trace.anomalies"] == 1


def test_the_applications_thread_only_queues_spans_the_worker_holds_and_measures_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured_on: set[str] = set()
    real_span_size = processor_module.span_size

    def span_size(span: ReadableSpan) -> int:
        measured_on.add(threading.current_thread().name)
        return real_span_size(span)

    monkeypatch.setattr(processor_module, "span_size", span_size)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(downstream=[SimpleSpanProcessor(exporter)], metrics_enabled=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent"):
        for _ in range(3):
            with tracer.start_as_current_span("step"):
                pass
    # Not force_flush: it would take the queue on this thread. The root's end wakes the worker.
    deadline = time.monotonic() + 10
    while len(exporter.get_finished_spans()) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    assert all("agent_profiler.self_time_ms" in (span.attributes or {}) for span in spans)
    assert measured_on == {"otel-agent-profiler"}  # the worker's thread, never the application's
    provider.shutdown()


class _StillTaking(SpanProcessor):
    """An exporting processor still taking spans after its shutdown (one that is shut down later)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.names.append(span.name)


def test_a_span_queued_while_shutdown_drains_still_goes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    downstream = _StillTaking()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(downstream=[downstream], metrics_enabled=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    real_span_ended_later = TraceAssembly.span_ended_later

    def shut_down_first(buffer: TraceAssembly[ReadableSpan], *args: Any) -> int:
        # Another thread shuts down (and drains) between on_end's check and the queueing.
        profiler.shutdown()
        return real_span_ended_later(buffer, *args)

    root = tracer.start_span("agent")
    child = tracer.start_span("step", context=trace.set_span_in_context(root))
    monkeypatch.setattr(TraceAssembly, "span_ended_later", shut_down_first)
    child.end()
    monkeypatch.undo()
    root.end()  # after shutdown: passes straight through
    assert sorted(downstream.names) == ["agent", "step"]
