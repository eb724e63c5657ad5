"""Grouping spans per trace until each trace is complete: one mechanism for the SDK processor and ``serve``.

Both hold the spans of traces in flight, hand whole traces over to be profiled, and hand back,
unprofiled but never dropped, whatever does not fit or comes too late. They differ in how a trace
completes and in what a cap does, and those are the constructor's parameters:

* completion: after ``idle_timeout_s`` without a span of the trace starting or ending; and, with
  ``complete_at_local_root``, as soon as a local root has ended and none of its spans is open
  (the processor sees spans start; ``serve`` only sees them once ended);
* at ``max_traces``: ``EVICT_OLDEST`` pushes the oldest trace out to make room (the processor: the
  newest traces are the ones the application is running), ``REFUSE_NEW`` refuses the span of the
  new trace (``serve``: its senders keep the data older traces would lose);
* at ``max_spans_per_trace``: ``RELEASE_TRACE`` pushes the whole trace out, ``REFUSE_SPAN`` refuses
  the new span only.

Thread-safe, with O(1) work per span under one short lock. Spans are opaque here: anything with a
trace id (and, for the processor, a span id).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

SpanT = TypeVar("SpanT")

#: Why spans went out without a profile: the values of the ``agent_profiler.outcome`` attribute of
#: the ``agent_profiler.spans`` metric. A cap pushed them out (or refused them):
TRACE_CAP = "unprofiled_trace_cap"
SPAN_CAP = "unprofiled_span_cap"
#: They belong to a trace already profiled, timed out or flushed:
LATE = "unprofiled_late"
#: Profiling their trace failed, or the span could not be used:
ERROR = "unprofiled_error"
#: A flush or shutdown ran out of time before profiling their trace:
FLUSH_TIMEOUT = "unprofiled_flush_timeout"

#: What happens to a span of a new trace when ``max_traces`` traces are held.
TraceCapPolicy = Literal["evict_oldest", "refuse_new"]
EVICT_OLDEST: TraceCapPolicy = "evict_oldest"
REFUSE_NEW: TraceCapPolicy = "refuse_new"
#: What happens to a span of a trace that holds ``max_spans_per_trace`` spans already.
SpanCapPolicy = Literal["release_trace", "refuse_span"]
RELEASE_TRACE: SpanCapPolicy = "release_trace"
REFUSE_SPAN: SpanCapPolicy = "refuse_span"

# Why a trace was let go of when no cap did it: its later spans are late.
_COMPLETE = "complete"
_TIMED_OUT = "timed_out"
_FLUSHED = "flushed"


@dataclass
class TraceState(Generic[SpanT]):
    """The spans of one trace held so far."""

    trace_id: Hashable
    #: Clock time of the trace's last span start or end: the wait for completion counts
    #: from there, so a long run that is still active is not cut short.
    last_activity: float
    spans: list[SpanT] = field(default_factory=list)
    open_span_ids: set[int] = field(default_factory=set)
    local_root_ended: bool = False


@dataclass
class Passthrough(Generic[SpanT]):
    """Spans to export unprofiled, and why (one of the reasons above)."""

    reason: str
    spans: list[SpanT]


@dataclass
class AssemblyCounts:
    """Spans handed back unprofiled, by reason."""

    over_trace_cap: int = 0
    over_span_cap: int = 0
    late: int = 0

    @property
    def over_caps(self) -> int:
        return self.over_trace_cap + self.over_span_cap


class TraceAssembly(Generic[SpanT]):
    """Holds spans per trace until the trace is complete, within caps; see the module docstring.

    Args:
        max_traces: traces held at most (in flight or complete and waiting to be taken).
        max_spans_per_trace: spans held at most per trace.
        idle_timeout_s: a trace without a span starting or ending for this long is complete.
        complete_at_local_root: a trace is also complete once a local root ended and none of the
            spans seen starting is still open.
        at_trace_cap: ``EVICT_OLDEST`` or ``REFUSE_NEW``.
        at_span_cap: ``RELEASE_TRACE`` or ``REFUSE_SPAN``.
        remembered_traces: how many released trace ids are remembered to recognise their later
            spans; by default ``max(1024, 8 * max_traces)``.
        clock: seconds, monotonic; tests drive time by hand.

    Raises:
        ValueError: a cap below 1, a negative timeout or an unknown policy.
    """

    def __init__(
        self,
        max_traces: int,
        max_spans_per_trace: int,
        *,
        idle_timeout_s: float,
        complete_at_local_root: bool,
        at_trace_cap: TraceCapPolicy,
        at_span_cap: SpanCapPolicy,
        remembered_traces: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle_timeout_s < 0:
            raise ValueError("idle_timeout_s must not be negative")
        if max_traces < 1 or max_spans_per_trace < 1:
            raise ValueError("max_traces and max_spans_per_trace must be at least 1")
        if at_trace_cap not in (EVICT_OLDEST, REFUSE_NEW) or at_span_cap not in (RELEASE_TRACE, REFUSE_SPAN):
            raise ValueError(f"unknown cap policy: {at_trace_cap!r}, {at_span_cap!r}")
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.idle_timeout_s = idle_timeout_s
        self._complete_at_local_root = complete_at_local_root
        self._evict_oldest = at_trace_cap == EVICT_OLDEST
        self._release_trace = at_span_cap == RELEASE_TRACE
        self._clock = clock
        self._lock = threading.Lock()
        # Least recently active first: that is the order traces time out and are evicted in.
        self._in_flight: OrderedDict[Hashable, TraceState[SpanT]] = OrderedDict()
        self._ready: deque[TraceState[SpanT]] = deque()
        # Traces already let go of (complete, pushed out by a cap, timed out, flushed): their
        # later spans are handed back. Bounded; the oldest ids are forgotten first.
        self._released: OrderedDict[Hashable, str] = OrderedDict()
        self._max_released = max(1024, 8 * max_traces) if remembered_traces is None else remembered_traces
        self._held_spans = 0
        self.counts = AssemblyCounts()

    def __len__(self) -> int:
        with self._lock:
            return len(self._in_flight) + len(self._ready)

    @property
    def held_spans(self) -> int:
        return self._held_spans

    @property
    def held_traces(self) -> int:
        return len(self)

    @property
    def full(self) -> bool:
        """True when a span of a new trace meets the trace cap."""
        return len(self) >= self.max_traces

    # -- spans coming in -------------------------------------------------------------------

    def span_started(self, trace_id: Hashable, span_id: int) -> Passthrough[SpanT] | None:
        """Note an open span. Returns spans pushed out to make room, if any."""
        with self._lock:
            state = self._in_flight.get(trace_id)
            if state is None:
                if trace_id in self._released:
                    return None
                evicted = None
                if len(self._in_flight) + len(self._ready) >= self.max_traces:
                    if not self._evict_oldest:
                        # Not held: the span is refused when it ends, unless there is room then.
                        return None
                    evicted = self._make_room()
                state = self._in_flight[trace_id] = TraceState(trace_id, self._clock())
                state.open_span_ids.add(span_id)
                return evicted
            state.open_span_ids.add(span_id)
            state.last_activity = self._clock()
            self._in_flight.move_to_end(trace_id)
            return None

    def span_ended(
        self, trace_id: Hashable, span_id: int | None, span: SpanT, is_local_root: bool
    ) -> tuple[list[Passthrough[SpanT]], bool]:
        """Hold an ended span. Returns the spans to export unprofiled now (usually none) and
        whether a trace became ready to profile (``take_ready``)."""
        passthrough: list[Passthrough[SpanT]] = []
        with self._lock:
            state = self._in_flight.get(trace_id)
            if state is None:
                reason = self._released.get(trace_id)
                if reason is not None:
                    return [self._refuse(reason if reason in (TRACE_CAP, SPAN_CAP) else LATE, span)], False
                # A span we never saw start: the profiler was added while it was open, or the
                # spans arrive ended (serve).
                if len(self._in_flight) + len(self._ready) >= self.max_traces:
                    if not self._evict_oldest:
                        return [self._refuse(TRACE_CAP, span)], False
                    evicted = self._make_room()
                    if evicted is not None:
                        passthrough.append(evicted)
                state = self._in_flight[trace_id] = TraceState(trace_id, self._clock())
            if span_id is not None:
                state.open_span_ids.discard(span_id)
            if len(state.spans) >= self.max_spans_per_trace:
                if not self._release_trace:
                    passthrough.append(self._refuse(SPAN_CAP, span))
                    return passthrough, False
                del self._in_flight[trace_id]
                self._release(trace_id, SPAN_CAP)
                self._held_spans -= len(state.spans)
                self.counts.over_span_cap += len(state.spans) + 1
                passthrough.append(Passthrough(SPAN_CAP, [*state.spans, span]))
                return passthrough, False
            state.last_activity = self._clock()
            self._in_flight.move_to_end(trace_id)
            state.spans.append(span)
            self._held_spans += 1
            if is_local_root:
                state.local_root_ended = True
            if self._complete_at_local_root and state.local_root_ended and not state.open_span_ids:
                del self._in_flight[trace_id]
                self._ready.append(state)
                # From now on its spans are late, even before the trace is taken.
                self._release(trace_id, _COMPLETE)
                return passthrough, True
            return passthrough, False

    def add(self, trace_id: Hashable, span: SpanT) -> list[Passthrough[SpanT]]:
        """Hold a span that arrived ended and whose start was never seen (serve's road).

        Returns the spans to export unprofiled now: usually none; this one when it is refused.
        """
        return self.span_ended(trace_id, None, span, False)[0]

    def _refuse(self, reason: str, span: SpanT) -> Passthrough[SpanT]:
        if reason == LATE:
            self.counts.late += 1
        elif reason == TRACE_CAP:
            self.counts.over_trace_cap += 1
        else:
            self.counts.over_span_cap += 1
        return Passthrough(reason, [span])

    def _release(self, trace_id: Hashable, reason: str) -> None:
        self._released[trace_id] = reason
        if len(self._released) > self._max_released:
            self._released.popitem(last=False)

    def _make_room(self) -> Passthrough[SpanT] | None:
        # The oldest data goes first: a trace waiting to be profiled is older than any in flight.
        if self._ready:
            state = self._ready.popleft()
        elif self._in_flight:
            _, state = self._in_flight.popitem(last=False)
        else:
            return None
        self._release(state.trace_id, TRACE_CAP)
        self._held_spans -= len(state.spans)
        self.counts.over_trace_cap += len(state.spans)
        return Passthrough(TRACE_CAP, state.spans)

    # -- traces going out ------------------------------------------------------------------

    def take_ready(self) -> list[TraceState[SpanT]]:
        """Complete traces, to be profiled (released when they became ready)."""
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            self._held_spans -= sum(len(state.spans) for state in ready)
            return ready

    def take_expired(self) -> list[TraceState[SpanT]]:
        """Traces with no span started or ended for ``idle_timeout_s``, to be profiled as they are."""
        deadline = self._clock() - self.idle_timeout_s
        with self._lock:
            expired = []
            while self._in_flight:
                state = next(iter(self._in_flight.values()))
                if state.last_activity > deadline:
                    break
                self._in_flight.popitem(last=False)
                self._release(state.trace_id, _TIMED_OUT)
                self._held_spans -= len(state.spans)
                expired.append(state)
            return expired

    def take_all(self) -> tuple[list[TraceState[SpanT]], list[TraceState[SpanT]]]:
        """Everything held: (complete traces, incomplete traces). Used by flush and shutdown."""
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            incomplete = list(self._in_flight.values())
            self._in_flight.clear()
            for state in incomplete:
                self._release(state.trace_id, _FLUSHED)
            self._held_spans = 0
            return ready, incomplete

    def next_expiry(self) -> float | None:
        """Clock time at which the least recently active trace times out, if any."""
        with self._lock:
            if not self._in_flight:
                return None
            return next(iter(self._in_flight.values())).last_activity + self.idle_timeout_s
