"""The state behind the receivers: assemble, profile, enrich, forward, and count.

``Pipeline.receive`` is called by both receivers with a decoded request. Spans the trace assembly
holds are profiled by a worker thread once their trace goes quiet, or reaches the maximum trace
age (then with what it has; its later spans are late); the others (late, over a
cap, unusable) are forwarded at once, unprofiled.

A span is *held* from the moment it is accepted until the forwarder reports it delivered or
failed: while its trace assembles, while it waits in the forward queue, and while it is sent.
Before taking a request, ``receive`` checks what is held against ``max_pending_spans`` and
``max_held_bytes`` (and, while the upstream fails, the trace cap); at a limit it raises
``Overloaded`` and takes nothing, which the receivers turn into OTLP's retryable status. So what
is held exceeds a limit by at most one request. Bytes are estimated from the serialized
(protobuf) size of the received request, shared equally by its spans. Throughout,
``received == forwarded + failed + rejected + held`` (rejected: spans the upstream's answer refused).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..core import trace_to_dict
from ..core.categories import CATEGORIES
from ..core.profile import TraceProfile
from ..core.records import SpanRecord
from ..core.units import NS_PER_MS
from ..errors import InternalErrorLog, Overloaded
from ..live.load_history import LoadHistory
from ..live.profile_metrics import ProfileMetrics
from ..live.profile_options import ProfileOptions
from ..live.profiling import CONSEQUENCES, ProfilingStep
from ..live.program_averages import ProgramAverages
from ..live.trace_assembly import ERROR, REFUSE_NEW, REFUSE_SPAN, TraceAssembly, TraceState
from .forwarder import DeliveryCounts, Forwarder, Outcome
from .spans import HeldSpan, Origin, build_request, enrich, held_spans_of

logger = logging.getLogger(__name__)

# The service keeps running past its own bugs; each one is logged, not just the first.
_PROFILING_ERRORS = InternalErrorLog(logger, "%s failed for trace %s; %s", repeat_level=logging.ERROR)


def _report_profiling_error(where: str, trace_id: str) -> None:
    _PROFILING_ERRORS.report(f"serve {where}", where, trace_id, CONSEQUENCES[where])


#: How many released trace ids are remembered to recognise late spans.
REMEMBERED_TRACES = 100_000
#: Traces that go quiet together are forwarded together, in requests of about this many spans.
FORWARD_BATCH_SPANS = 1000


@dataclass
class PipelineConfig:
    """How long the pipeline waits for a trace and how much it holds (``serve``'s options)."""

    quiet_period_s: float = 5.0
    #: A trace first seen this long ago is profiled and forwarded with the spans it has, however active; its
    #: later spans are forwarded unprofiled. Bounds how long a span waits in assembly (and what a kill loses).
    max_trace_age_s: float = 60.0
    max_traces: int = 1000
    max_spans_per_trace: int = 10_000
    #: Spans held (assembling, waiting to be forwarded or being sent) past which senders are pushed back.
    max_pending_spans: int = 100_000
    #: Estimated bytes of span data held (serialized size) past which senders are pushed back.
    max_held_bytes: int = 256 * 1024 * 1024
    #: Profiles kept for ``/profiles``.
    recent_profiles: int = 1000
    #: Categories, prices and context windows of the profiles (``--category-overrides``, ``--prices``).
    profile_options: ProfileOptions = field(default_factory=ProfileOptions)


@dataclass
class Counts(DeliveryCounts):
    """Running totals for ``/health``: spans received, forwarded, failed and rejected by the upstream,
    then profiled, invalid, requests pushed back, traces profiled."""

    profiled: int = 0
    invalid: int = 0
    rejected_requests: int = 0
    traces: int = 0


class Pipeline:
    def __init__(
        self,
        config: PipelineConfig,
        forwarder: Forwarder | None,
        metrics: ProfileMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        backend_load: LoadHistory | None = None,
    ) -> None:
        self.config = config
        self.forwarder = forwarder
        self.metrics = metrics
        #: The inference servers' sampled metrics (``serve --backend-metrics``): each LLM call gets its load.
        self.backend_load = backend_load
        # Spans arrive ended, from many services, in any order: a trace is complete once it has
        # gone quiet. At a cap the span is refused (forwarded unprofiled): held data stays whole.
        self._assembler: TraceAssembly[HeldSpan] = TraceAssembly(
            config.max_traces,
            config.max_spans_per_trace,
            idle_timeout_s=config.quiet_period_s,
            complete_at_local_root=False,
            at_trace_cap=REFUSE_NEW,
            at_span_cap=REFUSE_SPAN,
            remembered_traces=REMEMBERED_TRACES,
            clock=clock,
            max_age_s=config.max_trace_age_s,
        )
        self._clock = clock
        self._context_windows = config.profile_options.context_windows
        self._lock = threading.Condition()
        self._profiles: OrderedDict[str, TraceProfile] = OrderedDict()
        #: Every profiled trace, averaged per program (``GET /programs``); it has its own lock, so
        #: reading it never holds up receiving.
        self.programs = ProgramAverages()
        self._profiling = ProfilingStep(
            config.profile_options,
            _report_profiling_error,
            metrics=lambda: self.metrics,
            backend_load=backend_load,
            programs=self.programs,
        )
        self.counts = Counts()
        # Accepted spans not yet delivered or failed, and their estimated bytes (see the module docstring).
        self._held_spans = 0
        self._held_bytes = 0
        #: Bytes held besides spans (metrics and logs waiting to be forwarded), counted against the same limit.
        self.other_held_bytes: Callable[[], int] = lambda: 0
        if forwarder is not None:
            forwarder.on_done = self._settled
        self._stopping = False
        self._worker = threading.Thread(target=self._run, name="agent-profiler-assembler", daemon=True)
        self._worker.start()

    # -- receiving -----------------------------------------------------------------------

    def _limit_reached(self) -> str | None:
        """Why no request can be taken now, or None. Called with the lock held."""
        config = self.config
        if self._held_spans >= config.max_pending_spans:
            return f"{self._held_spans} spans held (--max-pending-spans {config.max_pending_spans})"
        if self._held_bytes + self.other_held_bytes() >= config.max_held_bytes:
            return f"{self._held_bytes} bytes of spans held (memory limit {config.max_held_bytes})"
        forwarder = self.forwarder
        if forwarder is not None and forwarder.failing and self._assembler.full:
            return "upstream failing and the trace cap reached"
        return None

    def overloaded(self) -> bool:
        """Whether a request would be pushed back now."""
        return self.not_ready() is not None

    def not_ready(self) -> str | None:
        """Why a request would be pushed back now (a limit reached, or stopping), or None."""
        with self._lock:
            return "shutting down" if self._stopping else self._limit_reached()

    @property
    def held_bytes(self) -> int:
        """Estimated bytes of the spans held (read without the lock: a moment's value)."""
        return self._held_bytes

    def receive(self, request: ExportTraceServiceRequest) -> int:
        """Take the spans of a request; returns how many. Raises ``Overloaded`` (nothing taken)."""
        if self._stopping:
            raise Overloaded("shutting down")
        if self.overloaded():  # cheap early answer; checked again below, with the spans counted
            self._reject()
        problems: list[str] = []
        held = held_spans_of(request, problems, request.ByteSize())
        if problems:
            logger.warning("%d unusable spans forwarded unprofiled, first: %s", len(problems), problems[0])
        unprofiled: list[HeldSpan] = []
        outcomes: dict[str, int] = {}
        with self._lock:
            if self._stopping or self._limit_reached() is not None:
                self._reject()
            self.counts.received += len(held)
            self._held_spans += len(held)
            self._held_bytes += sum(item.size for item in held)
            for item in held:
                trace_id = item.trace_id
                if trace_id is None:
                    self.counts.invalid += 1
                    unprofiled.append(item)
                    outcomes[ERROR] = outcomes.get(ERROR, 0) + 1
                    continue
                for group in self._assembler.add(trace_id, item):
                    unprofiled.extend(group.spans)
                    outcomes[group.reason] = outcomes.get(group.reason, 0) + len(group.spans)
            self._lock.notify_all()
        if unprofiled:
            self._forward([(item.origin, item.span) for item in unprofiled], sum(item.size for item in unprofiled))
        if self.metrics is not None:
            for outcome, count in outcomes.items():
                self.metrics.count_spans(outcome, count)
        return len(held)

    def _reject(self) -> None:
        with self._lock:
            self.counts.rejected_requests += 1
            reason = "shutting down" if self._stopping else self._limit_reached()
        raise Overloaded(reason or "held data at a limit")

    def _settled(self, outcome: Outcome, size_bytes: int) -> None:
        """The forwarder's report on a batch: it no longer holds those spans."""
        with self._lock:
            self.counts.settle(outcome)
            self._held_spans -= outcome.forwarded + outcome.failed + outcome.rejected
            self._held_bytes -= size_bytes

    # -- profiling -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                expiry = self._assembler.next_expiry()
                due = None if expiry is None else expiry - self._clock()
                self._lock.wait(timeout=0.5 if due is None else min(max(due, 0.01), 0.5))
                # Aged first: take_expired would take them too, as quiet (complete) traces.
                aged = self._assembler.take_aged()
                ready = self._assembler.take_expired()
            self._profile_all(ready, complete=True)
            self._profile_all(aged, complete=False)

    def _profile_all(self, ready: list[TraceState[HeldSpan]], *, complete: bool) -> None:
        """Profile ``ready`` and forward its spans in requests of up to ``FORWARD_BATCH_SPANS`` spans."""
        batch: list[tuple[Origin, Any]] = []
        batch_bytes = 0
        for pending in ready:
            batch.extend(self._profile(pending, complete=complete))
            batch_bytes += sum(item.size for item in pending.spans)
            if len(batch) >= FORWARD_BATCH_SPANS:
                self._forward(batch, batch_bytes)
                batch, batch_bytes = [], 0
        self._forward(batch, batch_bytes)

    def _profile(self, pending: TraceState[HeldSpan], *, complete: bool) -> list[tuple[Origin, Any]]:
        """Profile one trace; returns its spans to forward (enriched, or as received if profiling failed)."""
        held = pending.spans
        records: list[SpanRecord] | None = None
        with _PROFILING_ERRORS.guard("serve profiling", "profiling", pending.trace_id, CONSEQUENCES["profiling"]):
            records = [record for item in held if (record := item.record) is not None]
        if records is None:
            if self.metrics is not None:
                self.metrics.count_spans(ERROR, len(held))
            return [(item.origin, item.span) for item in held]
        profiled = self._profiling.profile(records, complete=complete, outcome="complete" if complete else "flushed")
        profile = profiled.profile
        if profile is None:
            return [(item.origin, item.span) for item in held]
        with self._lock:
            self.counts.profiled += len(held)
            self.counts.traces += 1
            self._profiles[profile.trace_id] = profile
            self._profiles.move_to_end(profile.trace_id)
            while len(self._profiles) > self.config.recent_profiles:
                self._profiles.popitem(last=False)
        # The step's attributes are the records', in order; a span without a record goes as received.
        by_record = iter(profiled.attributes)
        return enrich(held, [next(by_record) if item.record is not None else None for item in held])

    def _forward(self, spans: list[tuple[Origin, Any]], size_bytes: int) -> None:
        if not spans:
            return
        if self.forwarder is not None:
            self.forwarder.submit(build_request(spans), size_bytes)
        else:  # profile only: nothing to deliver, the spans are no longer held
            with self._lock:
                self._held_spans -= len(spans)
                self._held_bytes -= size_bytes

    def stop(self) -> None:
        """Stop taking spans, and profile and hand over everything held (complete=False)."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        self._worker.join()
        with self._lock:
            ready, incomplete = self._assembler.take_all()
        self._profile_all(ready + incomplete, complete=False)

    # -- reporting -----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        forwarder = self.forwarder
        assembler = self._assembler
        with self._lock:
            counts = {
                "received": self.counts.received,
                "profiled": self.counts.profiled,
                "forwarded": self.counts.forwarded,
                "late": assembler.counts.late,
                "over_caps": assembler.counts.over_caps,
                "failed": self.counts.failed,
                # Taken by the upstream in a request, and refused in its answer (OTLP partial_success).
                "rejected": self.counts.rejected,
                "invalid": self.counts.invalid,
                "rejected_requests": self.counts.rejected_requests,
                "traces_profiled": self.counts.traces,
                "held_spans": assembler.held_spans,
                "held_traces": assembler.held_traces,
                # Taken from the assembly and not yet delivered or failed: queued, or being sent.
                "pending_spans": self._held_spans - assembler.held_spans,
                "held_bytes": self._held_bytes,
            }
        if self._stopping:
            status = "stopping"
        elif forwarder is not None and forwarder.failing:
            status = "degraded"
        else:
            status = "ok"
        return {"status": status, "upstream": forwarder is not None, "counts": counts}

    def profile(self, trace_id: str) -> dict[str, Any] | None:
        with self._lock:
            profile = self._profiles.get(trace_id.lower())
        return None if profile is None else trace_to_dict(profile, context_windows=self._context_windows)

    def summary(self) -> dict[str, Any]:
        """A summary across the recent profiled traces."""
        with self._lock:
            profiles = list(self._profiles.values())
        categories = {
            name: {
                "self_time_ms": sum(p.categories[name].self_time_ns for p in profiles) / NS_PER_MS,
                "critical_path_ms": sum(p.categories[name].critical_path_ns for p in profiles) / NS_PER_MS,
            }
            for name in CATEGORIES
        }
        critical = sum(p.critical_path_ns for p in profiles)
        for values in categories.values():
            values["critical_path_share"] = values["critical_path_ms"] * NS_PER_MS / critical if critical else 0.0
        return {
            "trace_count": len(profiles),
            "span_count": sum(p.span_count for p in profiles),
            "duration_ms": sum(p.duration_ns for p in profiles) / NS_PER_MS,
            "critical_path_ms": critical / NS_PER_MS,
            "categories": categories,
            "traces": [
                {
                    "trace_id": p.trace_id,
                    "root": p.roots[0].record.name if p.roots else None,
                    "duration_ms": p.duration_ns / NS_PER_MS,
                    "critical_path_ms": p.critical_path_ns / NS_PER_MS,
                    "span_count": p.span_count,
                }
                for p in reversed(profiles)
            ],
        }
