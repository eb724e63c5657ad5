"""Faults in the application: the profiler loses no span the same pipeline without it would deliver.

Each test first reproduced a defect an audit found (README "Delivery guarantees"), with real SDK
parts: a ``TracerProvider``, the SDK's ``BatchSpanProcessor`` and exporters that are slow, fail or
count what they receive. Every test prints ``sent / delivered / lost`` for its scenario; ``lost``
is what the profiler counted and logged as not delivered (``agent_profiler.spans`` outcomes
``lost_*``), and ``sent = delivered + lost`` always holds.
"""

from __future__ import annotations

import gc
import json
import logging
import multiprocessing
import multiprocessing.util
import os
import random
import threading
import time
import tracemalloc
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.metrics import Histogram, Meter, NoOpMeter, NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Tracer, set_span_in_context

from otel_agent_profiler import install
from otel_agent_profiler._sdk_internals import batch_queue
from otel_agent_profiler.core.profile import TraceProfile
from otel_agent_profiler.live.profile_metrics import SPANS
from otel_agent_profiler.plugin.downstream import Downstream
from otel_agent_profiler.plugin.processor import AgentProfilerSpanProcessor

pytestmark = pytest.mark.faults


class CountingExporter(SpanExporter):
    """Keeps the span ids it received; optionally slow (seconds per export call)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.span_ids: list[int] = []
        self.profiled = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.span_ids.extend(span.context.span_id for span in spans)
            self.profiled += sum(1 for span in spans if "agent_profiler.self_time_ms" in (span.attributes or {}))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    @property
    def delivered(self) -> int:
        return len(set(self.span_ids))


def span_outcomes(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    counts: dict[str, int] = {}
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == SPANS:
                    for point in metric.data.data_points:
                        counts[str(point.attributes["agent_profiler.outcome"])] = int(point.value)
    return counts


def lost_of(outcomes: dict[str, int]) -> int:
    return sum(count for outcome, count in outcomes.items() if outcome.startswith("lost_"))


def report(scenario: str, sent: int, delivered: int, lost: int) -> None:
    print(f"\n{scenario}: sent {sent} / delivered {delivered} / lost {lost}")


def one_big_trace(tracer: Tracer, children: int) -> int:
    with tracer.start_as_current_span("agent") as root:
        context = set_span_in_context(root)
        for index in range(children):
            tracer.start_span(f"step {index}", context=context).end()
    return children + 1


@pytest.fixture
def meter() -> Iterator[tuple[SdkMeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = SdkMeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


# -- 1. a large trace behind a BatchSpanProcessor ------------------------------------------------


@pytest.mark.parametrize("wiring", ["install", "span_exporter"])
def test_a_large_trace_reaches_the_exporter_whole_behind_a_batch_processor(
    wiring: str, meter: tuple[SdkMeterProvider, InMemoryMetricReader]
) -> None:
    meter_provider, reader = meter
    exporter = CountingExporter()
    provider = TracerProvider()
    if wiring == "install":
        provider.add_span_processor(BatchSpanProcessor(exporter))
        install(provider, meter_provider=meter_provider)
    else:
        provider.add_span_processor(AgentProfilerSpanProcessor(exporter, meter_provider=meter_provider))
    sent = one_big_trace(provider.get_tracer("t"), 5_000)
    provider.force_flush()
    outcomes = span_outcomes(reader)
    provider.shutdown()
    report(f"large trace ({wiring})", sent, exporter.delivered, lost_of(outcomes))
    assert exporter.delivered == sent
    assert exporter.profiled == sent
    assert lost_of(outcomes) == 0


# -- 2. a metrics API without the bucket advisory ---------------------------------------------------


class _OldHistogramMeter(NoOpMeter):
    """A meter from an older metrics API: ``create_histogram`` takes no bucket advisory."""

    def create_histogram(self, name: str, unit: str = "", description: str = "") -> Histogram:  # type: ignore[override]
        return super().create_histogram(name, unit=unit, description=description)


class _OldMeterProvider(NoOpMeterProvider):
    def get_meter(self, name: str, version: str | None = None, *args: Any, **kwargs: Any) -> Meter:
        return _OldHistogramMeter(name, version)


def test_a_metrics_api_without_bucket_advice_loses_no_span_and_raises_nothing() -> None:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        AgentProfilerSpanProcessor(exporter, meter_provider=_OldMeterProvider(), max_traces=5, trace_timeout_s=60)
    )
    tracer = provider.get_tracer("t")
    # Twenty traces left open push the oldest out through the trace cap, on the app's thread.
    open_spans = [tracer.start_span(f"open {index}") for index in range(20)]
    for index in range(100):
        with tracer.start_as_current_span(f"run {index}"):
            pass
    for span in open_spans:
        span.end()
    provider.shutdown()
    report("metrics API without bucket advice", 120, exporter.delivered, 0)
    assert exporter.delivered == 120
    assert exporter.profiled > 0


def test_a_meter_provider_that_raises_costs_the_metrics_only(never_raise: None, caplog: Any) -> None:
    class BrokenMeterProvider(NoOpMeterProvider):
        def get_meter(self, *args: Any, **kwargs: Any) -> Meter:
            raise RuntimeError("no meters here")

    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(AgentProfilerSpanProcessor(exporter, meter_provider=BrokenMeterProvider()))
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING):
        for index in range(50):
            with tracer.start_as_current_span(f"run {index}"):
                pass
        provider.shutdown()
    assert exporter.delivered == 50
    assert exporter.profiled == 50
    assert len([r for r in caplog.records if "metrics" in r.getMessage()]) == 1


# -- 3. one failing trace ---------------------------------------------------------------------------


@pytest.fixture
def one_step_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first profile's release (an internal step after the export) raises."""
    failures = iter([True])
    original = TraceProfile.release

    def release_failing_once(self: TraceProfile) -> None:
        if next(failures, False):
            raise RuntimeError("an internal step failed")
        original(self)

    monkeypatch.setattr(TraceProfile, "release", release_failing_once)


def test_one_trace_failing_inside_the_worker_costs_no_other_trace(never_raise: None, one_step_fails: None) -> None:
    exporter = CountingExporter()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(exporter, metrics_enabled=False)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    # All traces complete before the worker wakes, so they are one batch of its loop.
    with profiler._process_lock:
        for index in range(100):
            with tracer.start_as_current_span(f"run {index}"):
                with tracer.start_as_current_span("llm"):
                    pass
                with tracer.start_as_current_span("tool"):
                    pass
    provider.shutdown()
    report("one failing trace", 300, exporter.delivered, 0)
    assert exporter.delivered == 300


def test_one_trace_failing_in_the_final_drain_costs_no_other_trace(never_raise: None, one_step_fails: None) -> None:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(AgentProfilerSpanProcessor(exporter, metrics_enabled=False, trace_timeout_s=60))
    tracer = provider.get_tracer("t")
    # Open traces are profiled by the final drain, all in one go.
    for index in range(100):
        root = tracer.start_span(f"run {index}")
        tracer.start_span("llm", context=set_span_in_context(root)).end()
        tracer.start_span("tool", context=set_span_in_context(root)).end()
        tracer.start_span("never ends", context=set_span_in_context(root))
        root.end()
    provider.shutdown()
    report("one failing trace in the drain", 300, exporter.delivered, 0)
    assert exporter.delivered == 300


# -- 4. spans that start and never end ------------------------------------------------------------


def test_spans_that_never_end_hold_bounded_memory(never_raise: None) -> None:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(AgentProfilerSpanProcessor(exporter, metrics_enabled=False, max_spans_per_trace=1000))
    tracer = provider.get_tracer("t")
    root = tracer.start_span("agent")
    context = set_span_in_context(root)
    for _ in range(2_000):  # warm up: the first spans allocate the SDK's own caches
        tracer.start_span("never ends", context=context)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(100_000):
            tracer.start_span("never ends", context=context)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    root.end()
    provider.shutdown()
    # 100,000 open span ids in a set take about 6 MB; capped at 1,000 spans, well under 1 MB.
    assert after - before < 1_000_000
    assert exporter.delivered == 1


# -- 5. shutdown while the exporter is slow -------------------------------------------------------


def test_shutdown_counts_what_a_slow_exporter_could_not_take(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader], caplog: Any
) -> None:
    meter_provider, reader = meter
    exporter = CountingExporter(delay_s=0.3)  # 512 spans per 0.3 s
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(exporter, meter_provider=meter_provider, shutdown_timeout_s=1.0)
    provider.add_span_processor(profiler)
    sent = one_big_trace(provider.get_tracer("t"), 10_000)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        provider.shutdown()
    elapsed = time.monotonic() - started
    outcomes = span_outcomes(reader)
    lost = lost_of(outcomes)
    report("shutdown behind a slow exporter", sent, exporter.delivered, lost)
    assert exporter.delivered + lost == sent
    assert lost > 0
    assert any("could not be handed" in r.getMessage() for r in caplog.records)
    # One second for the profiler, then the batch processor's own shutdown exports its queue.
    assert elapsed < 1.0 + 5 * 0.3 + 2.0


class GatedExporter(SpanExporter):
    """Holds every export until ``gate`` is set, then keeps the span ids it received."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.span_ids: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.wait(30)
        self.span_ids.extend(span.context.span_id for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.gate.set()


def full_batch_queue(count: int) -> tuple[Downstream, BatchSpanProcessor, GatedExporter, list[ReadableSpan]]:
    """A batch processor (queue of 4) whose exporter holds its first batch, its queue filled, and
    ``count`` more ended spans to hand over."""
    exporter = GatedExporter()
    batch = BatchSpanProcessor(exporter, max_queue_size=4, max_export_batch_size=1, schedule_delay_millis=1)
    downstream = Downstream([batch])
    queue = batch_queue(batch)
    assert queue is not None
    tracer = TracerProvider().get_tracer("t")
    spans: list[ReadableSpan] = []
    for index in range(200):
        span = tracer.start_span(f"s{index}")
        span.end()
        spans.append(span)  # type: ignore[arg-type]
    handed = 0
    deadline = time.monotonic() + 5
    while len(queue) < 4 and time.monotonic() < deadline:
        batch.on_end(spans[handed])
        handed += 1
        time.sleep(0.01)  # the batch processor's thread takes its first span, and waits on the gate
    assert len(queue) == 4
    return downstream, batch, exporter, spans[handed : handed + count]


def hand_paced_in_thread(downstream: Downstream, spans: list[ReadableSpan]) -> tuple[threading.Thread, list[int]]:
    lost: list[int] = []
    thread = threading.Thread(target=lambda: lost.append(downstream.hand_paced(spans)), daemon=True)
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive(), "it waits for room"
    return thread, lost


def test_a_hand_over_waiting_for_room_without_a_deadline_ends_at_the_shutdown_deadline() -> None:
    # The worker hands a trace over with no deadline and waits for room; shutdown then sets one.
    # Before, that wait went on as long as the queue drained, however slowly, past the shutdown.
    downstream, batch, exporter, waiting = full_batch_queue(3)
    thread, lost = hand_paced_in_thread(downstream, waiting)
    downstream.give_up_by(time.monotonic() + 0.1)
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert lost == [3]
    exporter.gate.set()
    batch.shutdown()
    assert not {span.context.span_id for span in waiting} & set(exporter.span_ids)


def test_a_span_given_up_on_while_it_waited_for_room_is_counted_not_handed() -> None:
    # Shutdown gives up on a hung hand-over (abandon) and then shuts the processors down: a span
    # that found room after that was handed to a closed processor, which dropped it without a word,
    # and neither abandon nor the hand-over counted it.
    downstream, batch, exporter, waiting = full_batch_queue(1)
    thread, lost = hand_paced_in_thread(downstream, waiting)
    assert downstream.abandon() == 0  # nothing expected and not taken: the waiting span is the hand-over's
    exporter.gate.set()  # the queue drains: room for the waiting span
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert lost == [1]
    batch.shutdown()
    assert waiting[0].context.span_id not in exporter.span_ids


def test_shutdown_with_time_enough_delivers_everything_behind_a_slow_exporter(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader],
) -> None:
    meter_provider, reader = meter
    exporter = CountingExporter(delay_s=0.05)
    provider = TracerProvider()
    provider.add_span_processor(AgentProfilerSpanProcessor(exporter, meter_provider=meter_provider))
    sent = one_big_trace(provider.get_tracer("t"), 10_000)
    provider.shutdown()
    outcomes = span_outcomes(reader)
    report("shutdown behind a slowish exporter", sent, exporter.delivered, lost_of(outcomes))
    assert exporter.delivered == sent
    assert lost_of(outcomes) == 0


# -- 7. memory caps in bytes ----------------------------------------------------------------------


def test_a_byte_limit_bounds_the_buffer_and_sends_the_oldest_traces_out_unprofiled(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader],
) -> None:
    meter_provider, reader = meter
    exporter = CountingExporter()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(exporter, meter_provider=meter_provider, max_buffer_bytes=2_000_000)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    prompt = "x" * 10_000
    roots = []
    for index in range(50):  # 50 traces of 20 spans with 10 kB prompts: about 10 MB if all were held
        root = tracer.start_span(f"run {index}")
        roots.append(root)
        for _ in range(20):
            tracer.start_span("llm", context=set_span_in_context(root), attributes={"gen_ai.prompt": prompt}).end()
        assert profiler.held_bytes <= 2_000_000
    for root in roots:
        root.end()
    provider.shutdown()
    outcomes = span_outcomes(reader)
    report("byte limit", 50 * 21, exporter.delivered, lost_of(outcomes))
    assert exporter.delivered == 50 * 21
    assert outcomes.get("unprofiled_memory_cap", 0) > 0


_PAYLOAD = "x" * 10_000


def _span_with_payload(tracer: Tracer, root: Any, placement: str, previous: Any) -> None:
    """An ended span carrying 10 kB of text in one of the places instrumentations put prompts."""
    context = set_span_in_context(root)
    if placement == "event attribute":
        span = tracer.start_span("llm", context=context)
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": _PAYLOAD})
    elif placement == "event string array":
        span = tracer.start_span("llm", context=context)
        span.add_event("gen_ai.choice", {"gen_ai.completions": (_PAYLOAD[:5_000], _PAYLOAD[5_000:])})
    elif placement == "string array attribute":
        span = tracer.start_span("llm", context=context, attributes={"gen_ai.prompts": [_PAYLOAD[:5_000]] * 2})
    else:
        span = tracer.start_span("llm", context=context, links=[Link(previous, {"gen_ai.prompt": _PAYLOAD})])
    span.end()


@pytest.mark.parametrize(
    "placement", ["event attribute", "event string array", "string array attribute", "link attribute"]
)
def test_the_byte_limit_sees_payload_in_events_arrays_and_links(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader], placement: str
) -> None:
    meter_provider, reader = meter
    exporter = CountingExporter()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(exporter, meter_provider=meter_provider, max_buffer_bytes=2_000_000)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    roots = []
    # 30 traces of 20 spans with 10 kB each: about 6 MB of payload if all were held, while the
    # spans without it weigh about 1.5 MB, under the limit.
    for index in range(30):
        root = tracer.start_span(f"run {index}")
        roots.append(root)
        for _ in range(20):
            _span_with_payload(tracer, root, placement, previous=roots[0].get_span_context())
        assert profiler.held_bytes <= 2_000_000
    peak_held = profiler.held_bytes
    for root in roots:
        root.end()
    provider.shutdown()
    outcomes = span_outcomes(reader)
    sent = 30 * 21
    report(f"byte limit, payload in {placement}", sent, exporter.delivered, lost_of(outcomes))
    assert exporter.delivered == sent
    assert outcomes.get("unprofiled_memory_cap", 0) > 0
    assert peak_held > 1_500_000  # the payload held is seen, not only the spans around it


def test_a_trace_that_never_ends_holds_bounded_memory(never_raise: None) -> None:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(AgentProfilerSpanProcessor(exporter, metrics_enabled=False, max_spans_per_trace=1000))
    tracer = provider.get_tracer("t")
    root = tracer.start_span("agent that never ends")
    context = set_span_in_context(root)
    for _ in range(2_000):
        tracer.start_span("step", context=context).end()
    provider.force_flush()
    exporter.span_ids.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(30_000):
            tracer.start_span("step", context=context).end()
        provider.force_flush()
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    delivered = exporter.delivered
    provider.shutdown()
    report("a trace that never ends", 30_000, delivered, 0)
    assert delivered == 30_000
    # 30,000 held spans would take about 100 MB; what the exporter keeps (span ids) is about 2 MB.
    assert after - before < 5_000_000


# -- 8. a long trace that keeps producing spans --------------------------------------------------


def test_a_long_running_trace_is_profiled_at_its_timeout_and_its_later_spans_go_out_as_they_end(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader],
) -> None:
    meter_provider, reader = meter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(
        downstream=[SimpleSpanProcessor(exporter)], meter_provider=meter_provider, trace_timeout_s=1.0
    )
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    root = tracer.start_span("agent")
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 2.5:  # a step every 50 ms: never idle for the timeout
        tracer.start_span("step", context=set_span_in_context(root)).end()
        sent += 1
        time.sleep(0.05)
    # A crash now would lose what is still held: with the timeout counted from the trace's first
    # span, only what ended in the last moments may still be waiting.
    exported_while_running = len(exporter.get_finished_spans())
    root.end()
    sent += 1
    provider.shutdown()
    spans = exporter.get_finished_spans()
    outcomes = span_outcomes(reader)
    report("a trace running past its timeout", sent, len(spans), lost_of(outcomes))
    assert exported_while_running >= sent - 1 - 5
    assert len(spans) == sent
    profiled = [span for span in spans if "agent_profiler.self_time_ms" in (span.attributes or {})]
    assert 10 <= len(profiled) < sent - 10  # what ended within the first second, profiled
    assert all(span.attributes["agent_profiler.trace.complete"] is False for span in profiled)  # type: ignore[index]
    assert outcomes.get("unprofiled_late", 0) == sent - len(profiled)


# -- 9. a downstream processor that hangs ------------------------------------------------------------


class HangingExporter(CountingExporter):
    """Takes the first ``before_hang`` export calls, then blocks until released (a dead socket)."""

    def __init__(self, before_hang: int) -> None:
        super().__init__()
        self.calls = 0
        self.before_hang = before_hang
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls > self.before_hang:
            self.release.wait()
            return SpanExportResult.FAILURE
        return super().export(spans)

    def shutdown(self) -> None:
        self.release.wait(60)  # as hung as its export


def test_spans_behind_a_hung_simple_processor_are_counted_and_shutdown_keeps_its_timeout(
    meter: tuple[SdkMeterProvider, InMemoryMetricReader], caplog: Any
) -> None:
    meter_provider, reader = meter
    exporter = HangingExporter(before_hang=5)
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(
        downstream=[SimpleSpanProcessor(exporter)], meter_provider=meter_provider, shutdown_timeout_s=2.0
    )
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("t")
    sent = 0
    for _ in range(8):  # complete traces: the worker hands them over, and hangs at the sixth span
        sent += one_big_trace(tracer, 4)
    time.sleep(0.2)
    running = tracer.start_span("still running")
    tracer.start_span("step", context=set_span_in_context(running)).end()
    sent += 1
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING):
            provider.shutdown()
        elapsed = time.monotonic() - started
        outcomes = span_outcomes(reader)
    finally:
        exporter.release.set()
    hung = 1  # the span the hung export call holds: taken by the processor, neither delivered nor ours to count
    lost = lost_of(outcomes)
    report("behind a hung SimpleSpanProcessor", sent, exporter.delivered, lost)
    assert exporter.delivered == 5
    assert exporter.delivered + hung + lost == sent
    assert profiler.lost_spans == lost
    assert any("could not be handed" in r.getMessage() for r in caplog.records)
    assert elapsed < 2.0 + 3.0 + 1.0  # the timeout, the documented 3 s, and slack for a loaded machine


# -- a seeded chaos run ----------------------------------------------------------------------------


class FlakyExporter(CountingExporter):
    """Slow by a random amount, and failing some export calls (the batch is lost, as in the SDK)."""

    def __init__(self, seed: int, failure_rate: float, delay_s: float) -> None:
        super().__init__()
        self._rng = random.Random(seed)
        self.failure_rate = failure_rate
        self.max_delay_s = delay_s
        self.received = 0
        if hasattr(os, "register_at_fork"):
            # A lock another thread held at a fork stays held in the child: a fork-safe exporter renews it.
            os.register_at_fork(after_in_child=_renew_lock_after_fork(weakref.ref(self)))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.received += len(spans)
            fail = self._rng.random() < self.failure_rate
            delay = self._rng.random() * self.max_delay_s
        time.sleep(delay)
        if fail:
            return SpanExportResult.FAILURE
        return super().export(spans)


def _renew_lock_after_fork(ref: weakref.ref[CountingExporter]) -> Callable[[], None]:
    def renew() -> None:
        exporter = ref()
        if exporter is not None:
            exporter._lock = threading.Lock()

    return renew


def _chaos_load(tracer: Tracer, rng: random.Random, until: float, sent: list[int]) -> None:
    """Traces of random shapes: wide, deep, large attributes, spans that never end, late spans."""
    ended = 0
    while time.monotonic() < until:
        root = tracer.start_span("agent")
        context = set_span_in_context(root)
        late = []
        for index in range(rng.choice([0, 3, 20, 150])):
            attributes = {"gen_ai.prompt": "p" * rng.choice([10, 5_000])} if index % 7 == 0 else None
            child = tracer.start_span("llm" if index % 2 else "tool", context=context, attributes=attributes)
            roll = rng.random()
            if roll < 0.02:
                continue  # never ends
            if roll < 0.06:
                late.append(child)
                continue
            if roll < 0.1:
                tracer.start_span("nested", context=set_span_in_context(child)).end()
                ended += 1
            child.end()
            ended += 1
        root.end()
        ended += 1
        for child in late:
            child.end()
            ended += 1
        if rng.random() < 0.1:
            time.sleep(rng.random() * 0.02)
    sent.append(ended)


def _forked_worker(
    tracer: Tracer, profiler: AgentProfilerSpanProcessor, exporter: FlakyExporter, seed: int, report_path: str
) -> None:
    """A ``multiprocessing`` worker's run: random traces under the span the parent had open at the fork.

    Its copy of the pipeline counts in this process only, so what it sent, delivered, failed and lost is
    written to ``report_path`` by a finalizer that runs after the profiler's flush at the worker's exit
    (priority 0 after 100), just before ``os._exit``: what the exporter had by then is what was delivered.
    """
    accounting = profiler.downstream[0].span_exporter  # type: ignore[attr-defined]
    before = {"delivered": len(exporter.span_ids), "received": exporter.received}
    before |= {"failed": accounting.failed, "lost": profiler.lost_spans}
    sent: list[int] = []
    _chaos_load(tracer, random.Random(seed), time.monotonic() + 0.3, sent)

    def report() -> None:
        with exporter._lock:
            delivered = [f"{span_id:016x}" for span_id in exporter.span_ids[before["delivered"] :]]
            received = exporter.received - before["received"]
        counts = {"failed": accounting.failed - before["failed"], "lost": profiler.lost_spans - before["lost"]}
        document = {"pid": os.getpid(), "sent": sum(sent), "delivered": delivered, "received": received, **counts}
        with open(report_path, "w", encoding="utf-8") as file:
            json.dump(document, file)

    multiprocessing.util.Finalize(None, report, exitpriority=0)


def _fork_a_worker(
    tracer: Tracer, profiler: AgentProfilerSpanProcessor, exporter: FlakyExporter, seed: int, report_path: Path
) -> tuple[int, dict[str, Any]]:
    """Fork a worker while a span is open (as an agent hands a step to a process pool), wait for it; returns
    the spans this process sent (the open span) and the worker's report."""
    forked = multiprocessing.get_context("fork")
    with tracer.start_as_current_span("hand a step to a worker"):
        worker = forked.Process(target=_forked_worker, args=(tracer, profiler, exporter, seed, str(report_path)))
        worker.start()
    worker.join(timeout=60)
    assert worker.exitcode == 0, worker.exitcode
    return 1, json.loads(report_path.read_text(encoding="utf-8"))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("seed", range(8))
def test_chaos_every_span_is_delivered_or_counted(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    failure_rate = rng.choice([0.0, 0.0, 0.3])
    generous = rng.random() < 0.5
    exporter = FlakyExporter(seed, failure_rate, delay_s=rng.choice([0.0, 0.005, 0.03]))
    options = {
        "max_traces": rng.choice([3, 30, 1000]),
        "max_spans_per_trace": rng.choice([20, 200, 10_000]),
        "max_buffer_bytes": rng.choice([300_000, 5_000_000, 256 * 1024 * 1024]),
        "trace_timeout_s": rng.choice([0.05, 0.5, 60.0]),
        "sample_rate": rng.choice([1.0, 1.0, 0.5]),
        "shutdown_timeout_s": 30.0 if generous else rng.choice([0.05, 0.3]),
        "metrics_enabled": False,
    }
    provider = TracerProvider()
    profiler = AgentProfilerSpanProcessor(exporter, **options)
    provider.add_span_processor(profiler)
    tracer = provider.get_tracer("chaos")
    sent: list[int] = []
    until = time.monotonic() + 1.0
    threads = [
        threading.Thread(target=_chaos_load, args=(tracer, random.Random(seed * 10 + n), until, sent)) for n in range(2)
    ]
    for thread in threads:
        thread.start()
    # Meanwhile a worker process is forked with a span open, its traces under that span.
    time.sleep(rng.uniform(0.0, 0.5))
    opened, worker = _fork_a_worker(tracer, profiler, exporter, seed, tmp_path / "worker.json")
    sent.append(opened)
    for thread in threads:
        thread.join()
    # Shut down with whatever is still held or queued: the load stopped a moment ago.
    provider.shutdown()
    accounting = profiler.downstream[0].span_exporter  # type: ignore[attr-defined]
    total_sent = sum(sent)
    delivered = exporter.delivered
    failed = accounting.failed
    lost = profiler.lost_spans
    report(f"chaos seed {seed} {options}, failure rate {failure_rate}", total_sent, delivered, failed + lost)
    worker_lost = worker["failed"] + worker["lost"]
    report(f"  its forked worker (pid {worker['pid']})", worker["sent"], len(worker["delivered"]), worker_lost)
    assert len(exporter.span_ids) == delivered, "a span was exported twice"
    assert exporter.received == delivered + failed
    assert total_sent == delivered + failed + lost
    # The worker: every span it ended was exported by it or counted there, none by both processes.
    assert worker["sent"] > 0
    assert len(set(worker["delivered"])) == len(worker["delivered"]), "the worker exported a span twice"
    assert not {int(span_id, 16) for span_id in worker["delivered"]} & set(exporter.span_ids)
    assert worker["received"] == len(worker["delivered"]) + worker["failed"]
    assert worker["sent"] == len(worker["delivered"]) + worker_lost
    if failure_rate == 0:
        assert failed == 0 and worker["failed"] == 0
    if generous and options["max_buffer_bytes"] == 256 * 1024 * 1024:
        assert worker["lost"] == 0
        # Time enough at shutdown, and memory enough to hold what waits for the exporter:
        # nothing may be lost but what the exporter itself refused. (With a small byte limit,
        # spans the worker cannot hold while the queue is full are lost, counted, as the batch
        # processor alone would drop them.)
        assert lost == 0


# -- with the real OTLP exporter and a real collector ---------------------------------------------


@pytest.mark.e2e
def test_over_otlp_a_large_trace_arrives_whole_although_the_collector_starts_late(
    request: pytest.FixtureRequest,
) -> None:
    """The collector is down for the first seconds: the OTLP exporter retries, the queue stays full
    meanwhile, the profiler waits for room, and every span of a 5,001-span trace arrives."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from tests.support.backends import Rotel, artifact_dir

    rotel = Rotel(artifact_dir("faults", request.node.name))
    exporter = OTLPSpanExporter(endpoint=rotel.grpc_endpoint, insecure=True, timeout=20)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    profiler = install(provider, metrics_enabled=False)
    try:
        sent = one_big_trace(provider.get_tracer("t"), 5_000)
        time.sleep(2.0)  # the exporter's first attempts fail: nothing listens yet
        rotel.start()
        provider.shutdown()
        spans = rotel.wait_for_spans(lambda spans: len(spans) >= sent, timeout=60, what=f"{sent} spans")
    finally:
        rotel.stop()
    delivered = len({span.span_id for span in spans})
    report("over OTLP, collector starting late", sent, delivered, profiler.lost_spans)
    assert delivered == sent
    assert profiler.lost_spans == 0
    assert all("agent_profiler.self_time_ms" in span.attributes for span in spans)
