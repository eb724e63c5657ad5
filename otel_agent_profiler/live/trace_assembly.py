"""Grouping spans per trace until each trace is complete: one mechanism for the SDK processor and ``serve``.

Both hold the spans of traces in flight, hand whole traces over to be profiled, and hand back,
unprofiled but never dropped, whatever does not fit or comes too late. They differ in how a trace
completes and in what a cap does, and those are the constructor's parameters:

* completion: after ``idle_timeout_s`` without a span of the trace starting or ending; with
  ``max_age_s``, once that long has passed since the trace's first span, however active it is (the
  processor: a long run that keeps producing spans must still be profiled and exported before a
  crash can take it all); and, with ``complete_at_local_root``, as soon as a local root has ended
  and none of its spans is open (the processor sees spans start; ``serve`` only sees them once ended);
* at ``max_traces``: ``EVICT_OLDEST`` pushes the oldest trace out to make room (the processor: the
  newest traces are the ones the application is running), ``REFUSE_NEW`` refuses the span of the
  new trace (``serve``: its senders keep the data older traces would lose);
* at ``max_spans_per_trace``: ``RELEASE_TRACE`` pushes the whole trace out, ``REFUSE_SPAN`` refuses
  the new span only. Spans seen starting and not yet ended count too, so spans that never end
  cannot grow a trace without limit;
* at ``max_bytes`` (the estimated size of everything held, given per span by the caller; with
  ``EVICT_OLDEST`` only): the oldest traces are pushed out until the rest fits. Counts alone do not
  bound memory: one trace of large prompts weighs as much as thousands of small ones.

A flush in the middle of a trace (the processor's ``force_flush``) must export the spans that
ended without ending the trace: ``take_for_flush`` hands them over and the trace stays held, with
what the caller ``keep``s of them (the processor: their records, not the SDK spans) in their place,
so the trace's profile still covers them when it completes. What is kept counts toward the caps
like the spans it replaces.

Thread-safe, with O(1) work per span under one short lock. The processor's application threads
only queue what they see, without the lock (``span_started``, ``span_ended_later``): whatever reads
or changes the traces held first notes the queue, in order, under the lock it takes anyway, so
the work of holding spans falls to the processor's worker, which takes traces (at least once a
second, and whenever a local root ends). Spans are opaque here: anything with a trace id (and,
for the processor, a span id).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

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
#: The memory limit (``max_bytes``) pushed them out:
MEMORY_CAP = "unprofiled_memory_cap"

#: What one open span id costs while it is held (a set entry and the int), in bytes.
OPEN_SPAN_BYTES = 100
#: Queued spans past which the thread that queues one notes the queue itself: the spans wait for
#: the processor's worker, and must not pile up meanwhile uncounted toward ``max_bytes``.
MAX_QUEUED = 1024

#: What happens to a span of a new trace when ``max_traces`` traces are held.
TraceCapPolicy = Literal["evict_oldest", "refuse_new"]
EVICT_OLDEST: TraceCapPolicy = "evict_oldest"
REFUSE_NEW: TraceCapPolicy = "refuse_new"
#: What happens to a span of a trace that holds ``max_spans_per_trace`` spans already.
SpanCapPolicy = Literal["release_trace", "refuse_span"]
RELEASE_TRACE: SpanCapPolicy = "release_trace"
REFUSE_SPAN: SpanCapPolicy = "refuse_span"

_CAPS = (TRACE_CAP, SPAN_CAP, MEMORY_CAP)
# Why a trace was let go of when no cap did it: its later spans are late.
_COMPLETE = "complete"
_TIMED_OUT = "timed_out"
_FLUSHED = "flushed"


@dataclass
class TraceState(Generic[SpanT]):
    """The spans of one trace held so far."""

    trace_id: Hashable
    #: Clock time of the trace's last span start or end: the idle wait counts from there.
    last_activity: float
    #: Ended spans held, not yet exported.
    spans: list[SpanT] = field(default_factory=list)
    open_span_ids: set[int] = field(default_factory=set)
    local_root_ended: bool = False
    #: Estimated bytes of ``spans`` (their sizes as given to ``span_ended``).
    span_bytes: int = 0
    #: How many of the trace's ended spans a flush exported before the trace completed.
    exported_early: int = 0
    #: What the caller kept of those spans (``keep``), in the order they ended; opaque here.
    kept: list[Any] = field(default_factory=list)
    #: Estimated bytes of ``kept``: the sizes of the spans it stands for.
    kept_bytes: int = 0
    #: False when the caller could not keep what it needed of spans exported early: the trace
    #: can no longer be profiled whole.
    kept_whole: bool = True
    #: Clock time the trace was first seen: its age (``max_age_s``) counts from there.
    first_seen: float = field(init=False)

    def __post_init__(self) -> None:
        self.first_seen = self.last_activity

    @property
    def held_bytes(self) -> int:
        return self.span_bytes + self.kept_bytes + OPEN_SPAN_BYTES * len(self.open_span_ids)

    @property
    def span_count(self) -> int:
        """Ended spans of the trace seen so far: held, and exported early."""
        return len(self.spans) + self.exported_early


@dataclass
class UnprofiledSpans(Generic[SpanT]):
    """Spans to export unprofiled, and why (one of the reasons above)."""

    reason: str
    spans: list[SpanT]
    #: Their estimated bytes, as given to ``span_ended``.
    size: int = 0
    #: Spans of the same trace that a flush exported before it was pushed out: not exported
    #: again, but their trace goes unprofiled too, so they count with ``reason``.
    exported_early: int = 0

    @property
    def counted(self) -> int:
        """How many spans go unprofiled for ``reason``."""
        return len(self.spans) + self.exported_early


@dataclass
class AssemblyCounts:
    """Spans handed back unprofiled, by reason."""

    over_trace_cap: int = 0
    over_span_cap: int = 0
    over_memory_cap: int = 0
    late: int = 0

    @property
    def over_caps(self) -> int:
        return self.over_trace_cap + self.over_span_cap + self.over_memory_cap


class TraceAssembly(Generic[SpanT]):
    """Holds spans per trace until the trace is complete, within caps; see the module docstring.

    Args:
        max_traces: traces held at most (in flight or complete and waiting to be taken).
        max_spans_per_trace: spans held at most per trace.
        idle_timeout_s: a trace without a span starting or ending for this long is complete.
        max_age_s: a trace held this long since its first span is complete, however active;
            None for no limit.
        complete_at_local_root: a trace is also complete once a local root ended and none of the
            spans seen starting is still open.
        at_trace_cap: ``EVICT_OLDEST`` or ``REFUSE_NEW``.
        at_span_cap: ``RELEASE_TRACE`` or ``REFUSE_SPAN``.
        max_bytes: estimated bytes held at most (span sizes as given to ``span_ended``, plus
            ``OPEN_SPAN_BYTES`` per open span); None for no limit. Only with ``EVICT_OLDEST``.
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
        max_bytes: int | None = None,
        max_age_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        size_of: Callable[[SpanT], int] = lambda span: 0,
    ) -> None:
        if idle_timeout_s < 0:
            raise ValueError("idle_timeout_s must not be negative")
        if max_age_s is not None and max_age_s <= 0:
            raise ValueError("max_age_s must be positive")
        if max_traces < 1 or max_spans_per_trace < 1:
            raise ValueError("max_traces and max_spans_per_trace must be at least 1")
        if max_bytes is not None and (max_bytes < 1 or at_trace_cap != EVICT_OLDEST):
            # serve (REFUSE_NEW) bounds its memory before it takes a request, where a sender can
            # still be told to retry; here, only the oldest traces can make room.
            raise ValueError("max_bytes must be at least 1, and needs at_trace_cap=EVICT_OLDEST")
        if at_trace_cap not in (EVICT_OLDEST, REFUSE_NEW) or at_span_cap not in (RELEASE_TRACE, REFUSE_SPAN):
            raise ValueError(f"unknown cap policy: {at_trace_cap!r}, {at_span_cap!r}")
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_bytes = max_bytes
        self.idle_timeout_s = idle_timeout_s
        self.max_age_s = max_age_s
        self._complete_at_local_root = complete_at_local_root
        self._evict_oldest = at_trace_cap == EVICT_OLDEST
        self._release_trace = at_span_cap == RELEASE_TRACE
        self._clock = clock
        self._lock = threading.Lock()
        # Least recently active first: that is the order traces time out and are evicted in.
        self._in_flight: OrderedDict[Hashable, TraceState[SpanT]] = OrderedDict()
        # The traces in flight in the order they were first seen, for max_age_s (else empty).
        self._by_age: OrderedDict[Hashable, TraceState[SpanT]] = OrderedDict()
        self._ready: deque[TraceState[SpanT]] = deque()
        # Traces in flight with ended spans not yet exported, for take_for_flush: a flush after
        # every span end then costs what is new, not every trace held.
        self._unflushed: dict[Hashable, TraceState[SpanT]] = {}
        # Traces already let go of (complete, pushed out by a cap, timed out, flushed): their
        # later spans are handed back. Bounded; the oldest ids are forgotten first.
        self._released: OrderedDict[Hashable, str] = OrderedDict()
        self._max_released = max(1024, 8 * max_traces) if remembered_traces is None else remembered_traces
        self._held_spans = 0
        self._held_bytes = 0
        # Spans seen starting (trace id, span id, clock time) or ended (those and the span and whether
        # it is a local root), not yet noted: appending to a deque is safe on any thread without the
        # lock, and costs the application's thread a fraction of holding the span itself. The time is
        # the event's, so that a trace's idle time and age are as if noted then.
        self._queued: deque[tuple[Any, ...]] = deque()
        self._size_of = size_of
        # What noting them pushed out or refused, for the next span_ended or take_pushed_out to hand back.
        self._pushed_out_by_noting: list[UnprofiledSpans[SpanT]] = []
        self.counts = AssemblyCounts()

    def __len__(self) -> int:
        with self._lock:
            self._note_queued()
            return len(self._in_flight) + len(self._ready)

    @property
    def held_spans(self) -> int:
        return self._held_spans

    @property
    def held_bytes(self) -> int:
        """Estimated bytes held: the span sizes given, plus ``OPEN_SPAN_BYTES`` per open span."""
        if self._queued:
            with self._lock:
                self._note_queued()
        return self._held_bytes

    @property
    def held_traces(self) -> int:
        return len(self)

    @property
    def full(self) -> bool:
        """True when a span of a new trace meets the trace cap."""
        return len(self) >= self.max_traces

    # -- spans coming in -------------------------------------------------------------------

    def span_started(self, trace_id: Hashable, span_id: int) -> list[UnprofiledSpans[SpanT]]:
        """Note an open span. Returns spans pushed out to make room (usually none).

        The start is queued, without the lock, and noted by the next call that takes the lock (a
        span ending, the worker taking traces); only a long queue is noted here at once.
        """
        return self.take_pushed_out() if self._queue((trace_id, span_id, self._clock())) else []

    def span_ended_later(self, trace_id: Hashable, span_id: int, span: SpanT, is_local_root: bool) -> int:
        """Queue an ended span, to be held as ``span_ended`` would when the queue is next noted, with
        its size (``size_of``) measured then. What that pushes out or refuses comes back from
        ``take_pushed_out``; a trace it completes, from ``take_ready``.

        Returns how many spans are queued (0: this call noted them, the queue being long).
        """
        return 0 if self._queue((trace_id, span_id, self._clock(), span, is_local_root)) else len(self._queued)

    def _queue(self, item: tuple[Any, ...]) -> bool:
        """Queue a start or an end; True when the queue was long and this call noted it."""
        queued = self._queued
        queued.append(item)
        if len(queued) < MAX_QUEUED:
            return False
        with self._lock:
            self._note_queued()
        return True

    def refused_now(self, trace_id: Hashable, span: SpanT) -> UnprofiledSpans[SpanT] | None:
        """A span of a trace already let go of (complete, timed out, pushed out by a cap), refused
        as ``span_ended`` would refuse it, at once rather than queued; None for any other span.

        Looks without the lock first: nearly every span belongs to a trace still held. A trace let
        go of is never held again, so the spans of it still queued are refused when noted, as this
        one is now; only their order among themselves changes.
        """
        if trace_id not in self._released:
            return None
        with self._lock:
            reason = self._released.get(trace_id)
            return None if reason is None else self._refuse_released(reason, span)

    def take_pushed_out(self) -> list[UnprofiledSpans[SpanT]]:
        """Spans that noting the queue pushed out or refused, and no span end handed back yet."""
        with self._lock:
            self._note_queued()
            return self._take_pushed_out_by_noting()

    def _take_pushed_out_by_noting(self) -> list[UnprofiledSpans[SpanT]]:
        pushed_out = self._pushed_out_by_noting
        self._pushed_out_by_noting = []
        return pushed_out

    def _note_queued(self) -> None:
        """Note the spans queued by ``span_started`` and ``span_ended_later``, in order. Called with the lock held."""
        queued = self._queued
        if not queued:
            return
        pushed_out = self._pushed_out_by_noting
        in_flight = self._in_flight
        while queued:
            item = queued.popleft()
            if len(item) == 5:
                trace_id, span_id, now, span, is_local_root = item
                unprofiled, _ = self._hold_ended(trace_id, span_id, span, is_local_root, self._size_of(span), now)
                pushed_out += unprofiled
                continue
            trace_id, span_id, now = item
            state = in_flight.get(trace_id)
            if state is None:
                if trace_id in self._released:
                    continue
                if len(in_flight) + len(self._ready) >= self.max_traces:
                    if not self._evict_oldest:
                        # Not held: the span is refused when it ends, unless there is room then.
                        continue
                    self._make_room(TRACE_CAP, pushed_out)
                state = self._start_trace(trace_id, now)
            elif state.span_count + len(state.open_span_ids) >= self.max_spans_per_trace:
                # Not noted: should the trace complete before this span ends, the span is late
                # and goes out unprofiled, as spans of a trace over its cap do.
                continue
            else:
                state.last_activity = now
                in_flight.move_to_end(trace_id)
            if span_id not in state.open_span_ids:
                state.open_span_ids.add(span_id)
                self._held_bytes += OPEN_SPAN_BYTES
            if self.max_bytes is not None and self._held_bytes > self.max_bytes:
                self._shed_bytes(trace_id, pushed_out)

    def span_ended(
        self, trace_id: Hashable, span_id: int | None, span: SpanT, is_local_root: bool, size: int = 0
    ) -> tuple[list[UnprofiledSpans[SpanT]], bool]:
        """Hold an ended span of estimated ``size`` bytes. Returns the spans to export unprofiled
        now (usually none) and whether a trace became ready to profile (``take_ready``)."""
        with self._lock:
            if self._queued:
                self._note_queued()
            unprofiled, ready = self._hold_ended(trace_id, span_id, span, is_local_root, size, self._clock())
            if self._pushed_out_by_noting:
                # Pushed out before this span came: handed back first.
                unprofiled[:0] = self._take_pushed_out_by_noting()
            return unprofiled, ready

    def _hold_ended(
        self, trace_id: Hashable, span_id: int | None, span: SpanT, is_local_root: bool, size: int, now: float
    ) -> tuple[list[UnprofiledSpans[SpanT]], bool]:
        """``span_ended`` at clock time ``now``, called with the lock held and the queue noted."""
        unprofiled: list[UnprofiledSpans[SpanT]] = []
        state = self._in_flight.get(trace_id)
        if state is None:
            reason = self._released.get(trace_id)
            if reason is not None:
                return [self._refuse_released(reason, span, size)], False
            # A span we never saw start: the profiler was added while it was open, or the
            # spans arrive ended (serve).
            if len(self._in_flight) + len(self._ready) >= self.max_traces:
                if not self._evict_oldest:
                    return [self._refuse(TRACE_CAP, span, size)], False
                self._make_room(TRACE_CAP, unprofiled)
            state = self._start_trace(trace_id, now)
        if span_id is not None and span_id in state.open_span_ids:
            state.open_span_ids.discard(span_id)
            self._held_bytes -= OPEN_SPAN_BYTES
        if state.span_count >= self.max_spans_per_trace:
            if not self._release_trace:
                unprofiled.append(self._refuse(SPAN_CAP, span, size))
                return unprofiled, False
            self._leave_in_flight(trace_id)
            self._release(trace_id, SPAN_CAP)
            self._forget(state)
            self.counts.over_span_cap += len(state.spans) + 1
            unprofiled.append(
                UnprofiledSpans(SPAN_CAP, [*state.spans, span], state.span_bytes + size, state.exported_early)
            )
            return unprofiled, False
        if self.max_bytes is not None and self._held_bytes + size > self.max_bytes:
            self._shed_bytes(trace_id, unprofiled, size)
            if trace_id not in self._in_flight:
                # Its own trace had to go: this span follows it out.
                unprofiled.append(self._refuse(MEMORY_CAP, span, size))
                return unprofiled, False
        state.last_activity = now
        self._in_flight.move_to_end(trace_id)
        state.spans.append(span)
        state.span_bytes += size
        self._held_spans += 1
        self._held_bytes += size
        self._unflushed[trace_id] = state
        if is_local_root:
            state.local_root_ended = True
        if self._complete_at_local_root and state.local_root_ended and not state.open_span_ids:
            self._leave_in_flight(trace_id)
            del self._unflushed[trace_id]
            self._ready.append(state)
            # From now on its spans are late, even before the trace is taken.
            self._release(trace_id, _COMPLETE)
            return unprofiled, True
        return unprofiled, False

    def add(self, trace_id: Hashable, span: SpanT) -> list[UnprofiledSpans[SpanT]]:
        """Hold a span that arrived ended and whose start was never seen (serve's road).

        Returns the spans to export unprofiled now: usually none; this one when it is refused.
        """
        return self.span_ended(trace_id, None, span, False)[0]

    def _refuse_released(self, released: str, span: SpanT, size: int = 0) -> UnprofiledSpans[SpanT]:
        """A span of a trace let go of for ``released``: refused as the cap that pushed it out did, else late."""
        return self._refuse(released if released in _CAPS else LATE, span, size)

    def _refuse(self, reason: str, span: SpanT, size: int = 0) -> UnprofiledSpans[SpanT]:
        if reason == LATE:
            self.counts.late += 1
        elif reason == TRACE_CAP:
            self.counts.over_trace_cap += 1
        elif reason == MEMORY_CAP:
            self.counts.over_memory_cap += 1
        else:
            self.counts.over_span_cap += 1
        return UnprofiledSpans(reason, [span], size)

    def _start_trace(self, trace_id: Hashable, now: float) -> TraceState[SpanT]:
        state = self._in_flight[trace_id] = TraceState(trace_id, now)
        if self.max_age_s is not None:
            self._by_age[trace_id] = state
        return state

    def _leave_in_flight(self, trace_id: Hashable) -> None:
        del self._in_flight[trace_id]
        self._by_age.pop(trace_id, None)

    def _forget(self, state: TraceState[SpanT]) -> None:
        """Take a trace let go of off the held totals."""
        self._held_spans -= state.span_count
        self._held_bytes -= state.held_bytes
        if self._unflushed.get(state.trace_id) is state:
            del self._unflushed[state.trace_id]

    def _release(self, trace_id: Hashable, reason: str) -> None:
        self._released[trace_id] = reason
        if len(self._released) > self._max_released:
            self._released.popitem(last=False)

    def _make_room(self, reason: str, pushed_out: list[UnprofiledSpans[SpanT]]) -> bool:
        """Push the oldest trace out, for ``reason``; False when nothing is held."""
        # The oldest data goes first: a trace waiting to be profiled is older than any in flight.
        if self._ready:
            state = self._ready.popleft()
        elif self._in_flight:
            _, state = self._in_flight.popitem(last=False)
            self._by_age.pop(state.trace_id, None)
        else:
            return False
        self._release(state.trace_id, reason)
        self._forget(state)
        if reason == MEMORY_CAP:
            self.counts.over_memory_cap += len(state.spans)
        else:
            self.counts.over_trace_cap += len(state.spans)
        if state.spans or state.exported_early:
            pushed_out.append(UnprofiledSpans(reason, state.spans, state.span_bytes, state.exported_early))
        return True

    def _shed_bytes(self, trace_id: Hashable, pushed_out: list[UnprofiledSpans[SpanT]], incoming: int = 0) -> None:
        """Push the oldest traces out until ``incoming`` more bytes fit; ``trace_id``'s goes last."""
        assert self.max_bytes is not None
        while self._held_bytes + incoming > self.max_bytes:
            oldest = self._ready[0].trace_id if self._ready else next(iter(self._in_flight), None)
            if oldest is None:
                return
            if oldest == trace_id and len(self._ready) + len(self._in_flight) > 1:
                # The trace that grows is the newest activity: older ones go before it.
                self._in_flight.move_to_end(trace_id)
                continue
            self._make_room(MEMORY_CAP, pushed_out)

    # -- traces going out ------------------------------------------------------------------

    def take_ready(self) -> list[TraceState[SpanT]]:
        """Complete traces, to be profiled (released when they became ready)."""
        with self._lock:
            self._note_queued()
            ready = list(self._ready)
            self._ready.clear()
            for state in ready:
                self._forget(state)
            return ready

    def take_expired(self) -> list[TraceState[SpanT]]:
        """Traces with no span started or ended for ``idle_timeout_s``, or first seen
        ``max_age_s`` ago, to be profiled as they are (their later spans are late)."""
        now = self._clock()
        deadline = now - self.idle_timeout_s
        with self._lock:
            self._note_queued()
            expired = []
            while self._in_flight:
                state = next(iter(self._in_flight.values()))
                if state.last_activity > deadline:
                    break
                self._in_flight.popitem(last=False)
                self._by_age.pop(state.trace_id, None)
                expired.append(state)
            expired.extend(self._pop_aged(now))
            for state in expired:
                self._release(state.trace_id, _TIMED_OUT)
                self._forget(state)
            return expired

    def take_aged(self) -> list[TraceState[SpanT]]:
        """Traces first seen ``max_age_s`` ago or longer, however active, to be profiled with what they
        have (their later spans are late). ``take_expired`` takes them too, with the idle ones; a caller
        that tells the two apart (``serve``: a quiet trace is complete, an aged one is not) takes these first."""
        with self._lock:
            self._note_queued()
            aged = self._pop_aged(self._clock())
            for state in aged:
                self._release(state.trace_id, _TIMED_OUT)
                self._forget(state)
            return aged

    def _pop_aged(self, now: float) -> list[TraceState[SpanT]]:
        """Take the traces in flight first seen ``max_age_s`` before ``now`` or earlier. Called with the lock held."""
        aged: list[TraceState[SpanT]] = []
        if self.max_age_s is None:
            return aged
        born_by = now - self.max_age_s
        while self._by_age:
            state = next(iter(self._by_age.values()))
            if state.first_seen > born_by:
                break
            self._by_age.popitem(last=False)
            del self._in_flight[state.trace_id]
            aged.append(state)
        return aged

    def take_all(self) -> tuple[list[TraceState[SpanT]], list[TraceState[SpanT]]]:
        """Everything held: (complete traces, incomplete traces). Used by shutdown (and serve's flush)."""
        with self._lock:
            self._note_queued()
            ready = list(self._ready)
            self._ready.clear()
            incomplete = list(self._in_flight.values())
            self._in_flight.clear()
            self._by_age.clear()
            self._unflushed.clear()
            for state in incomplete:
                self._release(state.trace_id, _FLUSHED)
            self._held_spans = 0
            self._held_bytes = 0
            return ready, incomplete

    def take_for_flush(self) -> list[tuple[TraceState[SpanT], list[SpanT]]]:
        """The ended spans of traces still in flight, to export now; the traces stay held.

        Each span is handed over once: the next call returns only spans that ended since. The
        caller exports them and gives ``keep`` what the trace's profile will need of them; until
        then the trace must not be taken (the processor holds its processing lock across both).
        Complete traces are not included: ``take_ready`` hands them over whole.
        """
        with self._lock:
            self._note_queued()
            taken = []
            for state in self._unflushed.values():
                taken.append((state, state.spans))
                state.exported_early += len(state.spans)
                state.spans = []
                # Kept in their place: the same estimate, until what is kept is let go of.
                state.kept_bytes += state.span_bytes
                state.span_bytes = 0
            self._unflushed.clear()
            return taken

    def keep(self, state: TraceState[SpanT], kept: list[Any] | None) -> None:
        """Keep, for the trace's profile, what stands for the spans ``take_for_flush`` took from it.

        ``kept`` has one item per span, in their order; None when the caller could not make them:
        the trace can then no longer be profiled whole (``TraceState.kept_whole``).
        """
        with self._lock:
            if kept is None:
                state.kept_whole = False
                # Nothing will profile what was kept so far: only the counts are needed now.
                state.kept.clear()
            elif state.kept_whole:
                state.kept.extend(kept)

    def open_span_ids_after_fork(self) -> set[int]:
        """The ids of the spans seen starting and not yet ended, read in a forked child.

        Takes no lock: a thread of the parent may have held it at the fork, and in the child it
        would never be released. No other thread runs in the child at that point.
        """
        held = {span_id for state in list(self._in_flight.values()) for span_id in state.open_span_ids}
        for item in list(self._queued):  # in order: a queued end closes what a queued start opened
            if len(item) == 5:
                held.discard(item[1])
            else:
                held.add(item[1])
        return held

    def next_expiry(self) -> float | None:
        """Clock time at which the next trace times out (idle, or by age), if any."""
        with self._lock:
            self._note_queued()
            if not self._in_flight:
                return None
            expiry = next(iter(self._in_flight.values())).last_activity + self.idle_timeout_s
            if self.max_age_s is not None and self._by_age:
                expiry = min(expiry, next(iter(self._by_age.values())).first_seen + self.max_age_s)
            return expiry
