"""``AgentProfilerSpanProcessor``: profiles each trace when it completes and exports enriched copies.

It sits in front of the exporting processors (``downstream``). The application's thread only
queues each span's start and end; the daemon worker holds them by trace. When a trace is complete
(its local root ended and none of its spans is open) a daemon worker profiles it with the
analysis core, hands enriched copies of its spans to the downstream processors and records
the profile metrics. A trace that does not complete within the timeout of its first span is
profiled with the spans that ended; its later spans are exported unprofiled. A ``force_flush``
exports the spans that ended, as the SDK promises, without ending their trace: those of a trace
still running go out marked ``agent_profiler.exported_early`` and their records stay held, so the
trace is profiled whole when it completes (its later spans enriched, its root with the totals).
Spans a cap pushes out are exported unprofiled too, by the worker: a whole trace handed to a slow
exporter must not hold up the application's thread. The worker hands spans over at the pace the
exporting processors can take them (``downstream.py``); what they cannot take by a deadline, or
what waits behind one that hangs, is counted and logged. After a fork, the child's spans under a
span open at the fork complete their traces in the child. Nothing the profiler does raises into
the app (docs/delivery.md).
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

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from typing_extensions import Unpack

from ..adapters.sdk_spans import records_from_spans
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..errors import handle_internal_errors, report_internal_error
from ..live.attributes import ALL as ALL_SPAN_ATTRIBUTES, EXPORTED_EARLY
from ..live.backend_poller import BackendPoller
from ..live.profile_metrics import ProfileMetrics
from ..live.profiling import ProfilingStep
from ..live.trace_assembly import (
    ERROR,
    EVICT_OLDEST,
    FLUSH_TIMEOUT,
    LATE,
    RELEASE_TRACE,
    TraceAssembly,
    TraceState,
    UnprofiledSpans,
)
from ..report.console import write_console_report
from .config import ProfilerConfig, ProfilerOptions, resolve_config
from .downstream import Downstream
from .enriched_span import EnrichedSpan
from .export_accounting import AccountingSpanExporter
from .process_hooks import flush_when_multiprocessing_exits, reinit_after_fork, shutdown_at_exit
from .span_size import span_size

_logger = logging.getLogger(__name__)

_TRACE_ID_LIMIT = (1 << 64) - 1
#: Queued spans from which each span end wakes the worker (they count toward the byte limit once held).
_WAKE_AT_QUEUED = 256
_RECENT_PROFILES = 20
#: The ``agent_profiler.spans`` outcome of spans the exporting processors could not take: their
#: queue stayed full (past ``downstream.STALL_S``, or a flush's or shutdown's deadline).
LOST_DOWNSTREAM_FULL = "lost_downstream_full"
# How often, at most, the worker logs that spans were lost (they are counted every time).
_LOST_LOG_INTERVAL_S = 60.0
# After a shutdown's deadline, how long it waits for the worker to finish handing over (no
# longer waiting for room, it finishes at once unless a processor hangs in on_end).
_WORKER_FINISH_S = 1.0
# After a shutdown's deadline, how long the exporting processors' own shutdown is waited for (a
# batch processor exports its queue then). With _WORKER_FINISH_S, what shutdown takes at most
# beyond shutdown_timeout_s (docs/delivery.md).
_DOWNSTREAM_SHUTDOWN_S = 2.0
# What a span exported before its trace completed carries instead of its profile.
_EARLY_MARK = {EXPORTED_EARLY: True}


class AgentProfilerSpanProcessor(SpanProcessor):
    """Profiles traces as they complete and exports their spans with profile attributes.

    Args:
        span_exporter: where to export spans; wrapped in a ``BatchSpanProcessor``.
        downstream: span processors to hand the (enriched) spans to, instead of or besides
            ``span_exporter``. With neither, the processor only profiles: metrics and the
            console report work, and spans are exported by whatever else the provider has.
        meter_provider: for the profile metrics; the global one by default.
        **options: any of the options of ``ProfilerOptions`` (``max_traces``,
            ``max_spans_per_trace``, ``trace_timeout_s``, ``sample_rate``, ``category_overrides``,
            ``prices``, ``metrics_enabled``, ``enrich_spans``, ``console_report``,
            ``max_operations``, ``max_buffer_bytes``, ``shutdown_timeout_s``, ``backend_metrics``,
            ``backend_metrics_interval_s``); unset ones come from the ``OTEL_AGENT_PROFILER_*``
            environment variables, then the defaults.

    Raises:
        ValueError: an unknown option, or an option with a value that cannot be used.
    """

    def __init__(
        self,
        span_exporter: SpanExporter | None = None,
        *,
        downstream: Sequence[SpanProcessor] = (),
        meter_provider: MeterProvider | None = None,
        **options: Unpack[ProfilerOptions],
    ) -> None:
        self.config: ProfilerConfig = resolve_config(**options)
        self._out = Downstream(downstream)
        if span_exporter is not None:
            self._out.add(BatchSpanProcessor(AccountingSpanExporter(span_exporter)))
        self._meter_provider = meter_provider
        self._metrics: ProfileMetrics | None = None
        self._metrics_on = self.config.metrics_enabled
        self._profiling = ProfilingStep(
            self.config.profile_options(),
            _report_profiling_error,
            metrics=self._profile_metrics,
            enrich=self.config.enrich_spans,
            all_span_attributes=self.config.span_attributes == ALL_SPAN_ATTRIBUTES,
        )
        # A trace is profiled when its id's low 64 bits are under the bound; at a rate of 1 the
        # bound is past every such value, so one comparison decides for every rate.
        rate = self.config.sample_rate
        self._sample_bound = _TRACE_ID_LIMIT + 1 if rate >= 1.0 else round(rate * _TRACE_ID_LIMIT)
        self._recent: deque[TraceProfile] = deque(maxlen=_RECENT_PROFILES)
        self._profiled_traces = 0
        # itertools.count is safe to advance from many threads at once; see _take_sampled_out.
        self._sampled_out = itertools.count()
        self._sampled_out_reads = 0
        self._sampled_out_reported = 0
        self._shutdown = False
        # In a forked child: the spans that were open in the parent at the fork (see _after_fork).
        self._opened_before_fork: frozenset[int] = frozenset()
        # The inference servers' metrics, polled from now on so that the first calls find samples.
        self.backend_poller: BackendPoller | None = None
        if self.config.backend_metrics:
            self.backend_poller = BackendPoller(
                self.config.backend_metrics, interval_s=self.config.backend_metrics_interval_s
            ).start()
            self._profiling.backend_load = self.backend_poller.history
        self._init_runtime_state()
        if self.config.console_report:
            # The SDK shuts its provider down at exit; this covers providers that do not.
            atexit.register(shutdown_at_exit, weakref.ref(self))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=reinit_after_fork(weakref.ref(self)))

    def _init_runtime_state(self) -> None:
        self._buffer: TraceAssembly[ReadableSpan] = TraceAssembly(
            self.config.max_traces,
            self.config.max_spans_per_trace,
            idle_timeout_s=self.config.trace_timeout_s,
            # The timeout is an age: a long run that keeps producing spans is profiled with what
            # ended by then, and its later spans go out unprofiled, instead of being held to its end.
            max_age_s=self.config.trace_timeout_s,
            complete_at_local_root=True,
            # The newest traces are the ones the application is running: the oldest make room.
            at_trace_cap=EVICT_OLDEST,
            at_span_cap=RELEASE_TRACE,
            max_bytes=self.config.max_buffer_bytes,
            # Measured when the worker holds the span, not on the application's thread.
            size_of=span_size,
        )
        # Spans a cap pushed out, for the worker to export, with their estimated bytes. They count
        # against max_buffer_bytes with what is held; past it, on_end exports them itself.
        self._pushed_out: deque[UnprofiledSpans[ReadableSpan]] = deque()
        self._pushed_out_bytes = 0
        # Spans the exporting processors could not take (LOST_DOWNSTREAM_FULL), and when it was last logged.
        self._lost = 0
        self._lost_logged = 0
        self._lost_logged_at = 0.0
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
        return self._out.processors

    def add_downstream(self, processor: SpanProcessor) -> None:
        """Hand spans to one more processor (used when wiring up a provider)."""
        self._out.add(processor)

    @property
    def held_bytes(self) -> int:
        """Estimated bytes of spans held: traces still running and spans waiting to be handed over."""
        return self._buffer.held_bytes + self._pushed_out_bytes

    @property
    def lost_spans(self) -> int:
        """Spans the exporting processors could not take (their queue stayed full); counted, logged."""
        return self._lost

    # -- the application's thread: O(1) per span ----------------------------------------

    # Both hooks use try/except, not the guard's ``with`` (two calls per hook and span).
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._out.with_on_start:
            self._out.on_start(span, parent_context)
        try:
            if self._shutdown:
                return
            if self._worker is None:
                # Started with the first span, so the wait for incomplete traces runs from then on.
                self._ensure_worker()
            context = span.context
            # Inline rather than a method: this runs for every span on the application's thread.
            if (context.trace_id & _TRACE_ID_LIMIT) >= self._sample_bound:
                return
            pushed_out = self._buffer.span_started(context.trace_id, context.span_id)
            for group in pushed_out:  # only when a long queue of starts was noted here
                self._hand_to_worker(group)
        except Exception:
            # The guard, inline (see above): logged once, never raised into the application.
            report_internal_error("on_start")

    def on_end(self, span: ReadableSpan) -> None:
        queued: int | None = None
        refused: UnprofiledSpans[ReadableSpan] | None = None
        try:
            if self._shutdown:
                self._export((span,))
                return
            context = span.context
            if (context.trace_id & _TRACE_ID_LIMIT) >= self._sample_bound:
                next(self._sampled_out)
                self._export((span,))
                if self._worker is None:
                    self._ensure_worker()
                return
            parent = span.parent
            # A span whose parent was open when this process was forked has its parent in another
            # process, as a remote one does: its trace completes here without that parent.
            is_local_root = parent is None or parent.is_remote or parent.span_id in self._opened_before_fork
            refused = self._buffer.refused_now(context.trace_id, span)
            if refused is None:
                # Queued: the worker measures it and holds it with its trace, off this thread.
                queued = self._buffer.span_ended_later(context.trace_id, context.span_id, span, is_local_root)
        except Exception:
            # The guard, inline (see above): logged once; the span goes out below.
            report_internal_error("on_end")
        if refused is not None:
            # A late span goes out at once, as it would without the profiler; a later span of a
            # trace a cap pushed out follows it, in order, via the worker.
            if refused.reason == LATE:
                self._export_unprofiled(refused)
            else:
                self._hand_to_worker(refused)
        elif queued is None:
            # The profiler failed on this span (logged by the guard): it goes out as it came.
            self._export((span,))
        elif self._shutdown:  # since the check above: shutdown's last drain may have missed it
            self._export(self._take_every_held_span())
        elif is_local_root or not 0 < queued < _WAKE_AT_QUEUED:
            self._wake_worker()  # a trace may be complete; a long queue (or one just noted, 0) must not wait

    def _hand_to_worker(self, group: UnprofiledSpans[ReadableSpan]) -> None:
        """Have the worker export ``group`` (counted as ``group.reason`` unless that is empty)."""
        if not group.size:
            group.size = sum(map(span_size, group.spans))
        if not self._stopping and self.held_bytes + group.size <= self.config.max_buffer_bytes:
            self._pushed_out_bytes += group.size
            self._pushed_out.append(group)
            if self._stopping:
                # Shutdown may have drained the queue already: nobody else will export these.
                self._export_pushed_out(give_up_at=time.monotonic())
            else:
                self._wake_worker()
            return
        # Shutting down, or the worker is behind by more than memory allows: what the exporting
        # processors have no room for now is counted as lost rather than pushed into a full queue.
        if group.reason:
            self._count(group.reason, group.counted)
        self._add_lost(len(group.spans) - self._out.hand(group.spans))

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
            with handle_internal_errors("worker"), self._process_lock:
                try:
                    self._out.notice_room()
                    self._export_pushed_out()
                    self._process(self._taken(self._buffer.take_ready()), complete=True)
                    self._process(self._taken(self._buffer.take_expired()), complete=False, outcome="timed_out")
                    self._report_sampled_out()
                    self._log_lost(final=False)
                finally:
                    self._out.settle()

    def _taken(self, states: list[TraceState[ReadableSpan]]) -> list[TraceState[ReadableSpan]]:
        """``states``, taken out of the buffer to hand over: noted with the exporting processors,
        so that a shutdown that finds the hand-over hung counts them (``_give_up_on_held``)."""
        self._out.expect(sum(len(state.spans) for state in states))
        return states

    def _process(self, states: Iterable[TraceState[ReadableSpan]], *, complete: bool, outcome: str = "") -> None:
        for state in states:
            # One trace that fails must not cost the others of the batch.
            with handle_internal_errors("worker"):
                self._profile_and_export(state, complete, outcome or "complete")

    def _profile_and_export(
        self, state: TraceState[ReadableSpan], complete: bool, outcome: str, give_up_at: float | None = None
    ) -> None:
        spans = state.spans
        # The records of spans a flush exported before the trace completed come first (they
        # ended first): the profile covers them, only the spans still held are exported.
        kept: list[SpanRecord] = state.kept
        if not spans and not state.exported_early:
            return
        records: list[SpanRecord] | None = None
        if state.kept_whole:
            with handle_internal_errors("profiling"):
                records = kept + records_from_spans(spans)
        if records is None:
            group = UnprofiledSpans(ERROR, spans, exported_early=state.exported_early)
            self._export_unprofiled(group, give_up_at, paced=True)
            return
        # Profiled, enriched and its metrics recorded before the export, so whoever sees the spans
        # exported sees their metrics. A failed analysis was counted by the step.
        profiled = self._profiling.profile(records, complete=complete, outcome=outcome)
        profile = profiled.profile
        if profile is None:
            self._export_paced(spans, give_up_at)
            return
        self._profiled_traces += 1
        exported = [
            span if extra is None else EnrichedSpan.of(span, extra)
            for span, extra in zip(spans, profiled.attributes[len(kept) :], strict=True)
        ]
        self._export_paced(exported, give_up_at)
        with handle_internal_errors("profile release"):
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

    def _profile_metrics(self) -> ProfileMetrics | None:
        if not self._metrics_on:
            return None
        if self._metrics is None:
            try:
                self._metrics = ProfileMetrics(self._meter_provider, self.config.max_operations)
            except Exception as exc:
                # Not the guard: the meter provider is the application's, not our bug. One that
                # cannot make our instruments turns the metrics off (warned once), never the spans.
                self._metrics_on = False
                _logger.warning(
                    "otel-agent-profiler: cannot create the profile metrics (%s: %s); spans are still "
                    "profiled and exported, without metrics",
                    type(exc).__name__,
                    exc,
                )
                return None
        return self._metrics

    def _count(self, outcome: str, spans: int) -> None:
        metrics = self._profile_metrics()
        if metrics is not None:
            with handle_internal_errors("metrics"):
                metrics.count_spans(outcome, spans)

    # -- export ----------------------------------------------------------------------------

    def _export(self, spans: Sequence[ReadableSpan]) -> None:
        """Hand spans over from the application's thread, which never waits: now, when the
        exporting processors have room for them, else through the worker, which waits for room."""
        handed = self._out.hand(spans)
        if handed < len(spans):
            self._hand_to_worker(UnprofiledSpans("", list(spans[handed:])))

    def _export_paced(self, spans: Sequence[ReadableSpan], give_up_at: float | None = None) -> None:
        """Hand spans over as the exporting processors can take them (the worker, flush, shutdown);
        no wait for room lasts past ``give_up_at`` or, once it began, the shutdown's deadline."""
        self._add_lost(self._out.hand_paced(spans, give_up_at))

    def _add_lost(self, lost: int) -> None:
        if lost:
            self._lost += lost
            self._count(LOST_DOWNSTREAM_FULL, lost)

    def _export_unprofiled(
        self, group: UnprofiledSpans[ReadableSpan], give_up_at: float | None = None, *, paced: bool = False
    ) -> None:
        if group.reason:
            self._count(group.reason, group.counted)
        if paced:
            self._export_paced(group.spans, give_up_at)
        else:
            self._export(group.spans)

    def _export_pushed_out(self, give_up_at: float | None = None) -> None:
        self._queue_pushed_out_by_noting()
        # popleft is atomic: a group is exported once even if the worker, a flush and an app
        # thread at shutdown drain the queue at the same time.
        while True:
            try:
                group = self._pushed_out.popleft()
            except IndexError:
                return
            self._out.expect(len(group.spans))
            try:
                with handle_internal_errors("worker"):
                    self._export_unprofiled(group, give_up_at, paced=True)
            finally:
                self._pushed_out_bytes -= group.size

    def _queue_pushed_out_by_noting(self) -> None:
        """Queue for export what the buffer pushed out or refused while noting queued spans: held
        (and counted) already, they take no more memory here, whatever ``max_buffer_bytes`` says.
        Their sizes are the buffer's own (``size_of``), measured when it noted them."""
        for group in self._buffer.take_pushed_out():
            self._pushed_out_bytes += group.size
            self._pushed_out.append(group)

    def _take_every_held_span(self) -> list[ReadableSpan]:
        """Every span the buffer holds or has queued, and what noting the queue pushed out: taken
        (atomically, so each goes out or is counted once), profiled or not."""
        ready, incomplete = self._buffer.take_all()
        spans = [span for state in (*ready, *incomplete) for span in state.spans]
        spans += [span for group in self._buffer.take_pushed_out() for span in group.spans]
        return spans

    def _give_up_on_held(self) -> None:
        """Count as lost every span still held or in hand: the hand-over is hung in an exporting
        processor (at shutdown, past its deadline), so none of them will be handed over."""
        self._log_lost(final=True)  # what was lost before, to a full queue
        lost = self._out.abandon()
        while True:
            try:
                group = self._pushed_out.popleft()
            except IndexError:
                break
            lost += len(group.spans)
            self._pushed_out_bytes -= group.size
        lost += len(self._take_every_held_span())
        self._add_lost(lost)
        self._lost_logged = self._lost
        _logger.warning(
            "otel-agent-profiler: an exporting processor did not return from on_end (its exporter hangs?); "
            "%d spans waiting behind it could not be handed over (%d in all so far)",
            lost,
            self._lost,
        )

    def _log_lost(self, *, final: bool) -> None:
        new = self._lost - self._lost_logged
        now = time.monotonic()
        if new and (final or now - self._lost_logged_at >= _LOST_LOG_INTERVAL_S):
            self._lost_logged = self._lost
            self._lost_logged_at = now
            _logger.warning(
                "otel-agent-profiler: %d spans could not be handed to the exporting processors: their "
                "queue stayed full, or one of them hung (%d in all so far)",
                new,
                self._lost,
            )

    # -- flush and shutdown ---------------------------------------------------------------

    def _drain_all(self, deadline: float, lock_deadline: float, *, final: bool) -> bool | None:
        """Export every ended span held, profiled where its trace can be; past ``deadline``
        export the rest unprofiled.

        A flush (not ``final``) profiles the complete traces and exports the ended spans of the
        others early, which stay held (``_export_early``); shutdown (``final``) profiles them
        with the spans that ended. Waits for the worker's lock until ``lock_deadline`` (the
        worker, past the deadline, no longer waits for room downstream, so it lets go soon).
        Returns False when the deadline cut the work short, None when the lock was not free by
        ``lock_deadline`` (nothing was done).
        """
        if not self._process_lock.acquire(timeout=max(0.0, lock_deadline - time.monotonic())):
            return None
        on_time = True
        try:
            with handle_internal_errors("flush"):
                # What a cap pushed out is older than anything still held.
                self._export_pushed_out(deadline)
                if final:
                    ready, incomplete = self._buffer.take_all()
                else:
                    # Early exports first: a trace that completes meanwhile is then ready, and taken
                    # below, so no span that ended before the flush is left behind.
                    self._export_early(deadline)
                    ready, incomplete = self._buffer.take_ready(), []
                self._taken([*ready, *incomplete])
                # Shutdown promises that every ended span is exported, so a trace still running is
                # profiled with what it has; spans ending later pass through unprofiled.
                work = [(state, True, "complete") for state in ready]
                work += [(state, False, "flushed") for state in incomplete]
                for state, complete, outcome in work:
                    with handle_internal_errors("flush"):
                        if time.monotonic() >= deadline:
                            on_time = False
                            group = UnprofiledSpans(FLUSH_TIMEOUT, state.spans, exported_early=state.exported_early)
                            self._export_unprofiled(group, deadline, paced=True)
                        else:
                            self._profile_and_export(state, complete, outcome, deadline)
                # What taking the traces pushed out (span starts noted then met a cap).
                self._export_pushed_out(deadline)
                self._report_sampled_out()
        finally:
            self._out.settle()
            self._process_lock.release()
        return on_time

    def _export_early(self, deadline: float) -> None:
        """Export the ended spans of traces still running, keeping their records for the profile.

        Each span is converted and exported once, whatever the number of flushes: a flush after
        every span end (as some agent frameworks do) costs what ended since the last one.
        """
        for state, spans in self._buffer.take_for_flush():
            self._out.expect(len(spans))
            records: list[SpanRecord] | None = None
            with handle_internal_errors("flush"):
                records = records_from_spans(spans)
            # Without the records the trace cannot be profiled whole: it will go out unprofiled.
            self._buffer.keep(state, records)
            if records is not None and self.config.enrich_spans:
                self._export_paced([EnrichedSpan.of(span, _EARLY_MARK) for span in spans], deadline)
            else:
                self._export_paced(spans, deadline)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export every span that ended, then flush the downstream processors.

        Complete traces are profiled first. A trace still running is not ended by the flush: its
        ended spans are exported now without profile attributes (marked
        ``agent_profiler.exported_early``), and it is profiled whole when it completes.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        if self._shutdown:
            _logger.warning("otel-agent-profiler: force_flush called after shutdown; ignored")
            return False
        flushed = self._drain_all(deadline, deadline, final=False)
        return self._out.force_flush(deadline) and flushed is True

    def flush_at_exit(self, timeout_millis: int = 30000) -> bool:
        """Flush for an application that is ending: like ``shutdown``, traces still running are
        profiled with the spans that ended (later spans of theirs go out unprofiled), so their
        metrics are recorded while the meter provider still takes them; then the downstream
        processors are flushed. The processor keeps working.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        if self._shutdown:
            return False
        flushed = self._drain_all(deadline, deadline, final=True)
        return self._out.force_flush(deadline) and flushed is True

    def shutdown(self) -> None:
        """Profile and export everything pending, then shut the downstream processors down.

        Profiling and handing spans over take at most ``shutdown_timeout_s``; spans the exporting
        processors cannot take by then are counted and logged. They are shut down only after the
        profiler has handed over everything it will, so none is refused by a closed processor.
        Returns within ``shutdown_timeout_s`` plus 3 s, even when an exporting processor hangs:
        the spans it never took are counted and logged, and its own shutdown is left to finish
        in the background.
        """
        if self._shutdown:
            return
        deadline = time.monotonic() + self.config.shutdown_timeout_s
        # From here on, spans that end pass straight through: none can land in the buffer
        # after it was drained.
        self._shutdown = True
        self._stopping = True
        # Every wait for room ends by the deadline, also one under way that took none when it began.
        self._out.give_up_by(deadline)
        self._wake.set()
        worker = self._worker
        hung = False
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                # Past the deadline it no longer waits for room; let it finish its hand-over.
                worker.join(timeout=_WORKER_FINISH_S)
                # Still at it: an exporting processor does not return from on_end.
                hung = worker.is_alive()
        lock_wait = 0.0 if hung else _WORKER_FINISH_S
        if self._drain_all(deadline, max(deadline, time.monotonic()) + lock_wait, final=True) is None:
            self._give_up_on_held()
        self._log_lost(final=True)
        if self.backend_poller is not None:
            self.backend_poller.stop()
        if self.config.console_report:
            self._print_console_report()
        self._add_lost(self._out.shutdown(max(deadline, time.monotonic()) + _DOWNSTREAM_SHUTDOWN_S))

    def _after_fork(self) -> None:
        """In a forked child: start afresh, with the spans open at the fork as remote parents.

        The parent process goes on with the spans it held (the child must not export them again)
        and ends the spans that were open at the fork; the child's spans under them form traces
        of their own here, which complete when the child's local roots end. ``multiprocessing``
        ends a child with ``os._exit``, which runs no ``atexit`` handler, after running its own
        finalizers: one of them flushes what this child's traces left.
        """
        self._opened_before_fork = self._opened_before_fork | self._buffer.open_span_ids_after_fork()
        self._init_runtime_state()
        multiprocessing_util = sys.modules.get("multiprocessing.util")
        if multiprocessing_util is not None:
            # multiprocessing clears its finalizers after the fork, then runs its after-fork hooks:
            # the finalizer is registered from one of those.
            multiprocessing_util.register_after_fork(self, flush_when_multiprocessing_exits)

    @handle_internal_errors("console report")
    def _print_console_report(self) -> None:
        write_console_report(sys.stderr, list(self._recent), self._profiled_traces)


def _report_profiling_error(where: str, trace_id: str) -> None:
    # The profiling step's report (called from its guard): inside the application a failure is
    # logged once per stage, whatever the trace.
    report_internal_error(where)
