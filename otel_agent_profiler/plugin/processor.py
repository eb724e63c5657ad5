"""``AgentProfilerSpanProcessor``: profiles each trace when it completes and exports enriched copies.

It sits in front of the exporting processors (``downstream``). On the application's thread it
does O(1) work per span: note a span opened, or hold an ended one. When a trace is complete
(its local root ended and none of its spans is open) a daemon worker profiles it with the
analysis core, hands enriched copies of its spans to the downstream processors and records
the profile metrics. A trace that does not complete within the timeout is profiled with the
spans that ended; its later spans are exported unprofiled. Spans a memory cap pushes out are
exported unprofiled too, by the worker: a whole trace handed to a slow exporter must not hold
up the application's thread. No span is ever dropped by the profiler, and nothing it does raises
into the app.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.context import Context, attach, detach, set_value
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from ..adapters.sdk_spans import records_from_spans
from ..core.analyze import profile_trace
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..errors import report_internal_error
from ..live.enrichment import span_attributes, trace_attributes
from ..live.profile_metrics import ProfileMetrics
from ..live.trace_assembly import (
    ERROR,
    EVICT_OLDEST,
    FLUSH_TIMEOUT,
    LATE,
    RELEASE_TRACE,
    Passthrough,
    TraceAssembly,
    TraceState,
)
from ..report.console import write_console_report
from .config import ProfilerConfig, resolve_config
from .enriched_span import EnrichedSpan
from .export_accounting import AccountingSpanExporter

_logger = logging.getLogger(__name__)

_TRACE_ID_LIMIT = (1 << 64) - 1
# Key the OpenTelemetry SDK and instrumentations check to keep exporter traffic untraced.
_SUPPRESS_INSTRUMENTATION_KEY = "suppress_instrumentation"
_RECENT_PROFILES = 20


class AgentProfilerSpanProcessor(SpanProcessor):
    """Profiles traces as they complete and exports their spans with profile attributes.

    Args:
        span_exporter: where to export spans; wrapped in a ``BatchSpanProcessor``.
        downstream: span processors to hand the (enriched) spans to, instead of or besides
            ``span_exporter``. With neither, the processor only profiles: metrics and the
            console report work, and spans are exported by whatever else the provider has.
        meter_provider: for the profile metrics; the global one by default.
        **options: any of the options in ``otel_agent_profiler.plugin.config.ProfilerConfig``
            (``max_traces``, ``max_spans_per_trace``, ``trace_timeout_s``, ``sample_rate``,
            ``category_overrides``, ``prices``, ``metrics_enabled``, ``enrich_spans``,
            ``console_report``, ``max_operations``); unset ones come from the
            ``OTEL_AGENT_PROFILER_*`` environment variables, then the defaults.

    Raises:
        ValueError: an option has a value that cannot be used.
    """

    def __init__(
        self,
        span_exporter: SpanExporter | None = None,
        *,
        downstream: Sequence[SpanProcessor] = (),
        meter_provider: MeterProvider | None = None,
        **options: Any,
    ) -> None:
        self.config: ProfilerConfig = resolve_config(**options)
        # A tuple, replaced whole when a processor is added, so iterating it on another thread is safe.
        self._downstream: tuple[SpanProcessor, ...] = tuple(downstream)
        if span_exporter is not None:
            self._downstream += (BatchSpanProcessor(AccountingSpanExporter(span_exporter)),)
        self._downstream_with_on_start = _with_on_start(self._downstream)
        self._meter_provider = meter_provider
        self._metrics: ProfileMetrics | None = None
        self._classifier = self.config.classifier()
        self._sample_bound = round(self.config.sample_rate * _TRACE_ID_LIMIT)
        self._sample_all = self.config.sample_rate >= 1.0
        self._recent: deque[TraceProfile] = deque(maxlen=_RECENT_PROFILES)
        self._profiled_traces = 0
        # itertools.count is safe to advance from many threads at once; see _take_sampled_out.
        self._sampled_out = itertools.count()
        self._sampled_out_reads = 0
        self._sampled_out_reported = 0
        self._shutdown = False
        self._init_runtime_state()
        if self.config.console_report:
            # The SDK shuts its provider down at exit; this covers providers that do not.
            atexit.register(_shutdown_at_exit, weakref.ref(self))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_reinit_after_fork(weakref.ref(self)))

    def _init_runtime_state(self) -> None:
        self._buffer: TraceAssembly[ReadableSpan] = TraceAssembly(
            self.config.max_traces,
            self.config.max_spans_per_trace,
            idle_timeout_s=self.config.trace_timeout_s,
            complete_at_local_root=True,
            # The newest traces are the ones the application is running: the oldest make room.
            at_trace_cap=EVICT_OLDEST,
            at_span_cap=RELEASE_TRACE,
        )
        # Spans a cap pushed out, for the worker to export. Bounded by construction: they were held.
        self._pushed_out: deque[Passthrough[ReadableSpan]] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._process_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()

    # -- wiring ---------------------------------------------------------------------------

    @property
    def recent_profiles(self) -> list[TraceProfile]:
        """The last profiles made (at most 20), oldest first. Unless the console report is on,
        their span trees are unlinked (``TraceProfile.release``)."""
        return list(self._recent)

    @property
    def downstream(self) -> tuple[SpanProcessor, ...]:
        return self._downstream

    def add_downstream(self, processor: SpanProcessor) -> None:
        """Hand spans to one more processor (used when wiring up a provider)."""
        self._downstream_with_on_start = _with_on_start((*self._downstream, processor))
        self._downstream = (*self._downstream, processor)

    # -- the application's thread: O(1) per span ----------------------------------------

    def _sampled(self, trace_id: int) -> bool:
        return self._sample_all or (trace_id & _TRACE_ID_LIMIT) < self._sample_bound

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for processor in self._downstream_with_on_start:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception:
                report_internal_error("downstream on_start")
        try:
            if self._shutdown:
                return
            if self._worker is None:
                # Started with the first span, so the wait for incomplete traces runs from then on.
                self._ensure_worker()
            context = span.context
            if not self._sampled(context.trace_id):
                return
            evicted = self._buffer.span_started(context.trace_id, context.span_id)
            if evicted is not None:
                self._hand_to_worker(evicted)
        except Exception:
            report_internal_error("on_start")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if self._shutdown:
                self._export((span,))
                return
            context = span.context
            if not self._sampled(context.trace_id):
                next(self._sampled_out)
                self._export((span,))
                if self._worker is None:
                    self._ensure_worker()
                return
            parent = span.parent
            is_local_root = parent is None or parent.is_remote
            passthrough, ready = self._buffer.span_ended(context.trace_id, context.span_id, span, is_local_root)
        except Exception:
            report_internal_error("on_end")
            self._export((span,))
            return
        for group in passthrough:
            # A late span goes out at once, as it would without the profiler; what a cap pushed
            # out (a whole trace, or a later span of one, kept in order behind it) goes via the worker.
            if group.reason == LATE:
                self._export_unprofiled(group)
            else:
                self._hand_to_worker(group)
        if ready:
            self._wake_worker()

    def _hand_to_worker(self, group: Passthrough[ReadableSpan]) -> None:
        self._pushed_out.append(group)
        if self._stopping:
            # Shutdown may have drained the queue already: nobody else will export these.
            self._export_pushed_out()
            return
        self._wake_worker()

    def _wake_worker(self) -> None:
        self._ensure_worker()
        # Setting an event takes its lock and notifies; when it is already set the worker has
        # yet to clear it, and it takes all its work after clearing, this call's included.
        if not self._wake.is_set():
            self._wake.set()

    # -- the worker ------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is not None:
            return
        with self._worker_lock:
            if self._worker is None and not self._stopping:
                self._worker = threading.Thread(target=self._run, name="otel-agent-profiler", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while not self._stopping:
            expiry = self._buffer.next_expiry()
            wait = 1.0 if expiry is None else min(1.0, max(0.01, expiry - time.monotonic()))
            self._wake.wait(wait)
            self._wake.clear()
            if self._stopping:
                break
            try:
                with self._process_lock:
                    self._export_pushed_out()
                    self._process(self._buffer.take_ready(), complete=True)
                    self._process(self._buffer.take_expired(), complete=False, outcome="timed_out")
                    self._report_sampled_out()
            except Exception:
                report_internal_error("worker")

    def _process(self, states: Iterable[TraceState[ReadableSpan]], *, complete: bool, outcome: str = "") -> None:
        for state in states:
            self._profile_and_export(state, complete, outcome or "complete")

    def _profile_and_export(self, state: TraceState[ReadableSpan], complete: bool, outcome: str) -> None:
        spans = state.spans
        if not spans:
            return
        try:
            records = records_from_spans(spans)
            profile = profile_trace(records, self._classifier, self.config.prices)
        except Exception:
            report_internal_error("profiling")
            self._export_unprofiled(Passthrough(ERROR, spans))
            return
        exported: Sequence[ReadableSpan] = spans
        if self.config.enrich_spans:
            try:
                exported = self._enriched(spans, records, profile, complete)
            except Exception:
                report_internal_error("enrichment")
        self._profiled_traces += 1
        metrics = self._profile_metrics()
        if metrics is not None:
            # Recorded before the export, so whoever sees the spans exported sees their metrics.
            try:
                metrics.record(profile)
                metrics.count_spans("profiled", len(spans))
                metrics.count_trace(outcome)
            except Exception:
                report_internal_error("metrics")
        self._export(exported)
        if not self.config.console_report:
            # Nothing will draw its tree: unlinked, it is freed without the garbage collector.
            profile.release()
        self._recent.append(profile)

    def _report_sampled_out(self) -> None:
        # Counted here, off the application's thread, rather than once per span in on_end.
        # Callers hold _process_lock, so two threads never read the counter at once.
        metrics = self._profile_metrics()
        if metrics is not None:
            metrics.count_spans("sampled_out", self._take_sampled_out())

    def _take_sampled_out(self) -> int:
        """Spans sampled out since the last call. Reading the counter advances it by one."""
        total = next(self._sampled_out) - self._sampled_out_reads
        self._sampled_out_reads += 1
        new = total - self._sampled_out_reported
        self._sampled_out_reported = total
        return new

    @staticmethod
    def _enriched(
        spans: Sequence[ReadableSpan], records: Sequence[SpanRecord], profile: TraceProfile, complete: bool
    ) -> list[ReadableSpan]:
        # records[i] was made from spans[i]; each profiled span keeps its record, so the record's
        # identity finds a span's profile without formatting its id again.
        by_record = {id(span.record): span for span in profile.spans}
        roots = {id(root.record) for root in profile.roots}
        totals = trace_attributes(profile, complete=complete)
        enriched: list[ReadableSpan] = []
        for span, record in zip(spans, records, strict=True):
            profiled = by_record.get(id(record))
            if profiled is None:
                enriched.append(span)
                continue
            extra = span_attributes(profiled)
            if id(record) in roots:
                extra.update(totals)
            enriched.append(EnrichedSpan.of(span, extra))
        return enriched

    def _profile_metrics(self) -> ProfileMetrics | None:
        if not self.config.metrics_enabled:
            return None
        if self._metrics is None:
            self._metrics = ProfileMetrics(self._meter_provider, self.config.max_operations)
        return self._metrics

    # -- export ----------------------------------------------------------------------------

    def _export(self, spans: Iterable[ReadableSpan]) -> None:
        # The exporters' own HTTP calls must not be traced by the app's instrumentation.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            for span in spans:
                for processor in self._downstream:
                    try:
                        processor.on_end(span)
                    except Exception:
                        report_internal_error("downstream on_end")
        finally:
            detach(token)

    def _export_unprofiled(self, group: Passthrough[ReadableSpan]) -> None:
        self._export(group.spans)
        metrics = self._profile_metrics()
        if metrics is not None:
            try:
                metrics.count_spans(group.reason, len(group.spans))
            except Exception:
                report_internal_error("metrics")

    def _export_pushed_out(self) -> None:
        # popleft is atomic: a group is exported once even if the worker, a flush and an app
        # thread at shutdown drain the queue at the same time.
        while True:
            try:
                group = self._pushed_out.popleft()
            except IndexError:
                return
            self._export_unprofiled(group)

    # -- flush and shutdown ---------------------------------------------------------------

    def _drain_all(self, deadline: float) -> bool:
        """Profile and export everything held; past ``deadline`` export the rest unprofiled.

        Returns False when the deadline cut the work short.
        """
        remaining = deadline - time.monotonic()
        if not self._process_lock.acquire(timeout=max(0.0, remaining)):
            return False
        on_time = True
        try:
            # What a cap pushed out is older than anything still held.
            self._export_pushed_out()
            ready, incomplete = self._buffer.take_all()
            # Flush and shutdown promise that every ended span is exported, so a trace still
            # running is profiled with what it has; its later spans will be exported unprofiled.
            work = [(state, True, "complete") for state in ready]
            work += [(state, False, "flushed") for state in incomplete]
            for index, (state, complete, outcome) in enumerate(work):
                if time.monotonic() >= deadline:
                    on_time = False
                    for late_state, _, _ in work[index:]:
                        self._export_unprofiled(Passthrough(FLUSH_TIMEOUT, late_state.spans))
                    break
                self._profile_and_export(state, complete, outcome)
            self._report_sampled_out()
        except Exception:
            report_internal_error("flush")
        finally:
            self._process_lock.release()
        return on_time

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Profile and export everything pending, then flush the downstream processors."""
        deadline = time.monotonic() + timeout_millis / 1000
        if self._shutdown:
            _logger.warning("otel-agent-profiler: force_flush called after shutdown; ignored")
            return False
        flushed = self._drain_all(deadline)
        for processor in self._downstream:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                flushed = processor.force_flush(remaining_ms) and flushed
            except Exception:
                report_internal_error("downstream force_flush")
                flushed = False
        return flushed

    def shutdown(self) -> None:
        """Profile and export everything pending, then shut the downstream processors down."""
        if self._shutdown:
            return
        deadline = time.monotonic() + 30.0
        # From here on, spans that end pass straight through: none can land in the buffer
        # after it was drained.
        self._shutdown = True
        self._stopping = True
        self._wake.set()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        self._drain_all(deadline)
        if self.config.console_report:
            self._print_console_report()
        for processor in self._downstream:
            try:
                processor.shutdown()
            except Exception:
                report_internal_error("downstream shutdown")

    def _print_console_report(self) -> None:
        try:
            write_console_report(sys.stderr, list(self._recent), self._profiled_traces)
        except Exception:
            report_internal_error("console report")


# Processors whose on_start is known to do nothing; calling them on the app's thread is waste.
_NO_OP_ON_START = {SpanProcessor.on_start, BatchSpanProcessor.on_start, SimpleSpanProcessor.on_start}


def _with_on_start(processors: Sequence[SpanProcessor]) -> tuple[SpanProcessor, ...]:
    return tuple(p for p in processors if type(p).on_start not in _NO_OP_ON_START)


def _shutdown_at_exit(ref: weakref.ref[AgentProfilerSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor.shutdown()


def _reinit_after_fork(ref: weakref.ref[AgentProfilerSpanProcessor]) -> Any:
    def reinit() -> None:
        # The child starts with no worker thread and must not export the parent's spans again.
        processor = ref()
        if processor is not None:
            processor._init_runtime_state()

    return reinit
